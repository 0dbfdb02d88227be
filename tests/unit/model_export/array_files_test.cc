#include "libs/model_export/array_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace syncopate::model_export {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(testing::TempDir(), "/arrays-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Npy, WritesWhatNumPyWritesAndReadsItBack) {
  const std::string dir = TempDir("npy");
  auto writer = NpyWriter::Create(dir + "/rows.npy", ArrayType::kFloat32, {3, 2});
  ASSERT_TRUE(writer.ok());
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  writer->Append(std::span<const float>(values).subspan(0, 4));
  writer->Append(std::span<const float>(values).subspan(4));
  ASSERT_TRUE(writer->Close().ok());
  const std::string bytes = Slurp(dir + "/rows.npy");
  // numpy.save(np.arange(1, 7, dtype='<f4').reshape(3, 2)) writes this 64-byte-aligned header.
  EXPECT_EQ(bytes.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }");
  EXPECT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes[127], '\n');
  auto header = ReadNpyHeader(dir + "/rows.npy");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->shape, (std::vector<int64_t>{3, 2}));
  std::vector<float> back(2);
  ASSERT_TRUE(ReadNpy(dir + "/rows.npy", *header, 2, std::span<float>(back)).ok());
  EXPECT_EQ(back, (std::vector<float>{3, 4}));
}

TEST(Npy, OneDimensionalShapesAreTuplesOfOne) {
  const std::string dir = TempDir("npy1");
  auto writer = NpyWriter::Create(dir + "/keys.npy", ArrayType::kUint64, {2});
  ASSERT_TRUE(writer.ok());
  const std::vector<uint64_t> keys = {7, ~uint64_t{0}};
  writer->Append(std::span<const uint64_t>(keys));
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_NE(
      Slurp(dir + "/keys.npy").find("'descr': '<u8', 'fortran_order': False, 'shape': (2,), }"),
      std::string::npos);
  auto header = ReadNpyHeader(dir + "/keys.npy");
  ASSERT_TRUE(header.ok());
  std::vector<uint64_t> back(2);
  ASSERT_TRUE(ReadNpy(dir + "/keys.npy", *header, 0, std::span<uint64_t>(back)).ok());
  EXPECT_EQ(back, keys);
}

TEST(Npy, ACountThatMissesTheShapeAndATruncatedFileAreRefused) {
  const std::string dir = TempDir("npybad");
  auto writer = NpyWriter::Create(dir + "/short.npy", ArrayType::kFloat32, {4});
  ASSERT_TRUE(writer.ok());
  const std::vector<float> three = {1, 2, 3};
  writer->Append(std::span<const float>(three));
  EXPECT_EQ(writer->Close().code(), absl::StatusCode::kInternal);
  auto whole = NpyWriter::Create(dir + "/cut.npy", ArrayType::kFloat32, {3});
  whole->Append(std::span<const float>(three));
  ASSERT_TRUE(whole->Close().ok());
  std::filesystem::resize_file(dir + "/cut.npy", std::filesystem::file_size(dir + "/cut.npy") - 1);
  auto header = ReadNpyHeader(dir + "/cut.npy");
  EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(header.status().message().find("truncated"), std::string::npos);
}

TEST(Safetensors, RoundTripsInOrderWithAnAlignedHeader) {
  const std::string dir = TempDir("st");
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {-1, -2};
  ASSERT_TRUE(
      WriteSafetensors(dir + "/d.safetensors", {{.name = "layer.0/w", .shape = {3, 2}, .values = w},
                                                {.name = "b\"q", .shape = {2}, .values = b}})
          .ok());
  const std::string bytes = Slurp(dir + "/d.safetensors");
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header + 32);
  EXPECT_NE(bytes.find(R"("layer.0/w":{"dtype":"F32","shape":[3,2],"data_offsets":[0,24]})"),
            std::string::npos);
  auto read = ReadSafetensors(dir + "/d.safetensors");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].name, "layer.0/w");
  EXPECT_EQ((*read)[0].values, w);
  EXPECT_EQ((*read)[1].name, "b\"q");
  EXPECT_EQ((*read)[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ((*read)[1].values, b);
  EXPECT_EQ(
      WriteSafetensors(dir + "/bad.safetensors", {{.name = "x", .shape = {3}, .values = b}}).code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::model_export
