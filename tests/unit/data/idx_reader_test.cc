#include "libs/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/data/data_file_test.h"

namespace syncopate::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// --- Building IDX files by hand -----------------------------------------------------------------

void AppendBigEndian(std::string& out, uint32_t value) {
  out.push_back(static_cast<char>(value >> 24));
  out.push_back(static_cast<char>(value >> 16));
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value));
}

std::string ImagesBytes(uint32_t count, uint32_t rows, uint32_t cols,
                        const std::vector<uint8_t>& pixels, uint32_t magic = 0x00000803) {
  std::string out;
  AppendBigEndian(out, magic);
  AppendBigEndian(out, count);
  AppendBigEndian(out, rows);
  AppendBigEndian(out, cols);
  out.append(pixels.begin(), pixels.end());
  return out;
}

std::string LabelsBytes(uint32_t count, const std::vector<uint8_t>& labels,
                        uint32_t magic = 0x00000801) {
  std::string out;
  AppendBigEndian(out, magic);
  AppendBigEndian(out, count);
  out.append(labels.begin(), labels.end());
  return out;
}

using IdxFileTest = DataFileTest;

// 3 images of 2 x 2 pixels; every pixel value is distinct so misplaced bytes show.
const std::vector<uint8_t> kTinyPixels = {0, 255, 51, 102, 1, 2, 3, 4, 200, 100, 50, 25};
const std::vector<uint8_t> kTinyLabels = {4, 0, 2};

void ExpectTinyDataset(const Dataset& dataset) {
  EXPECT_EQ(dataset.size, 3);
  EXPECT_EQ(dataset.dim, 4);
  EXPECT_EQ(dataset.num_classes, 5);
  EXPECT_THAT(dataset.labels, ElementsAre(4, 0, 2));
  ASSERT_EQ(dataset.features.size(), kTinyPixels.size());
  for (size_t i = 0; i < kTinyPixels.size(); ++i) {
    EXPECT_EQ(dataset.features[i], static_cast<float>(kTinyPixels[i]) / 255.0f) << "pixel " << i;
  }
  EXPECT_EQ(dataset.example(1)[0], 1.0f / 255.0f);
  EXPECT_EQ(dataset.example(0)[1], 1.0f);
}

// --- Hand-written files
// ---------------------------------------------------------------------------

TEST_F(IdxFileTest, ParsesPlainFilesExactly) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectTinyDataset(*dataset);
}

TEST_F(IdxFileTest, ParsesGzipFilesExactly) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WriteGzip("images.gz", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WriteGzip("labels.gz", LabelsBytes(3, kTinyLabels)), 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectTinyDataset(*dataset);
}

TEST_F(IdxFileTest, LimitKeepsFirstExamplesButClassCountOfWholeFile) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, {1, 0, 7})), 2);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->size, 2);
  EXPECT_THAT(dataset->labels, ElementsAre(1, 0));
  EXPECT_EQ(dataset->features.size(), 8u);
  EXPECT_EQ(dataset->num_classes, 8);  // label 7 sits beyond the limit
}

TEST_F(IdxFileTest, LimitAboveCountKeepsAll) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, kTinyLabels)), 1000);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectTinyDataset(*dataset);
}

TEST_F(IdxFileTest, EmptyDatasetHasNoClasses) {
  absl::StatusOr<Dataset> dataset = ReadIdxPair(WritePlain("images", ImagesBytes(0, 2, 2, {})),
                                                WritePlain("labels", LabelsBytes(0, {})), 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->size, 0);
  EXPECT_EQ(dataset->num_classes, 0);
  EXPECT_TRUE(dataset->features.empty());
}

TEST_F(IdxFileTest, TruncatedPixelsAreDataLossNamingFileAndByteCounts) {
  // The header promises 3 images (12 bytes of pixels) but only 2 images (8 bytes) follow.
  const std::vector<uint8_t> two_images(kTinyPixels.begin(), kTinyPixels.begin() + 8);
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string bytes = ImagesBytes(3, 2, 2, two_images);
    const std::string images = gzip ? WriteGzip("short.gz", bytes) : WritePlain("short", bytes);
    absl::StatusOr<Dataset> dataset =
        ReadIdxPair(images, WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
    EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(dataset.status().message(),
                AllOf(HasSubstr(images), HasSubstr("truncated"), HasSubstr("should be 12 bytes"),
                      HasSubstr("only 8 could be read")));
  }
}

TEST_F(IdxFileTest, TruncatedLabelsAreDataLoss) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, {4})), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(),
              AllOf(HasSubstr("labels"), HasSubstr("should be 3 bytes"), HasSubstr("only 1")));
}

TEST_F(IdxFileTest, TruncatedHeaderIsDataLoss) {
  const std::string header = ImagesBytes(3, 2, 2, {}).substr(0, 10);
  absl::StatusOr<Dataset> dataset = ReadIdxPair(
      WritePlain("images", header), WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(), HasSubstr("truncated"));
}

TEST_F(IdxFileTest, CutGzipStreamIsDataLoss) {
  std::vector<uint8_t> pixels(4096);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7919 % 251);
  const std::string whole = WriteGzip("whole.gz", ImagesBytes(16, 16, 16, pixels));
  std::string compressed;
  {
    std::ifstream in(whole, std::ios::binary);
    compressed.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(compressed.size(), 100u);
  const std::string cut = WritePlain("cut.gz", compressed.substr(0, compressed.size() / 2));
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(cut, WritePlain("labels", LabelsBytes(16, std::vector<uint8_t>(16, 1))), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(), HasSubstr(cut));
}

TEST_F(IdxFileTest, BadImagesMagicIsDataLoss) {
  // A labels file passed where images belong.
  const std::string images = WritePlain("images", LabelsBytes(3, kTinyLabels));
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(images, WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(),
              AllOf(HasSubstr(images), HasSubstr("0x00000801"), HasSubstr("0x00000803")));
}

TEST_F(IdxFileTest, BadLabelsMagicIsDataLoss) {
  const std::string labels = WritePlain("labels", LabelsBytes(3, kTinyLabels, 0x00000C01));
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)), labels, 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(), AllOf(HasSubstr(labels), HasSubstr("0x00000c01")));
}

TEST_F(IdxFileTest, ZeroSizedImagesAreDataLoss) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 0, 2, {})),
                  WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
}

// Two u32 sides whose product overflows int64 (a fuzzer's find) are refused, not multiplied.
TEST_F(IdxFileTest, HugeImageSidesAreDataLoss) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 0xFFFFFFFDu, 0xFFFFFA02u, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(), HasSubstr("image size 4294967293 x 4294965762"));
}

TEST_F(IdxFileTest, CountMismatchIsDataLoss) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(2, {4, 0})), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dataset.status().message(), AllOf(HasSubstr("3 images"), HasSubstr("2 labels")));
}

TEST_F(IdxFileTest, MissingFileIsNotFoundNamingPath) {
  const std::string missing = (dir_ / "no-such-images.gz").string();
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(missing, WritePlain("labels", LabelsBytes(3, kTinyLabels)), 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dataset.status().message(), HasSubstr(missing));
}

TEST_F(IdxFileTest, NegativeLimitIsInvalidArgument) {
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(WritePlain("images", ImagesBytes(3, 2, 2, kTinyPixels)),
                  WritePlain("labels", LabelsBytes(3, kTinyLabels)), -1);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument);
}

// --- The real Fashion-MNIST files (Debian package dataset-fashion-mnist)
// --------------------------

TEST(FashionMnist, LoadsTrainSplit) {
  absl::StatusOr<Dataset> train = LoadFashionMnist(kFashionMnistDir, Split::kTrain, 0);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size, 60000);
  EXPECT_EQ(train->dim, 784);
  EXPECT_EQ(train->num_classes, 10);
  ASSERT_EQ(train->features.size(), 60000u * 784u);
  ASSERT_EQ(train->labels.size(), 60000u);
  EXPECT_EQ(train->labels[0], 9);  // the first training image is an ankle boot
  const auto [min_pixel, max_pixel] =
      std::minmax_element(train->features.begin(), train->features.end());
  EXPECT_EQ(*min_pixel, 0.0f);
  EXPECT_EQ(*max_pixel, 1.0f);
  // Fashion-MNIST is balanced: 6000 training images per class.
  std::vector<int> per_class(10);
  for (int32_t label : train->labels) ++per_class[label];
  EXPECT_THAT(per_class, ::testing::Each(6000));
}

TEST(FashionMnist, LoadsTestSplit) {
  absl::StatusOr<Dataset> test = LoadFashionMnist(kFashionMnistDir, Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size, 10000);
  EXPECT_EQ(test->dim, 784);
  EXPECT_EQ(test->num_classes, 10);
  EXPECT_EQ(test->features.size(), 10000u * 784u);
  std::vector<int> per_class(10);
  for (int32_t label : test->labels) ++per_class[label];
  EXPECT_THAT(per_class, ::testing::Each(1000));
}

TEST(FashionMnist, CountsExamplesFromTheHeaderAlone) {
  EXPECT_EQ(*CountFashionMnist(kFashionMnistDir, Split::kTrain), 60000);
  EXPECT_EQ(*CountFashionMnist(kFashionMnistDir, Split::kTest), 10000);
  EXPECT_EQ(CountFashionMnist("/nonexistent", Split::kTrain).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(FashionMnist, LimitReadsAPrefix) {
  absl::StatusOr<Dataset> small = LoadFashionMnist(kFashionMnistDir, Split::kTrain, 100);
  absl::StatusOr<Dataset> larger = LoadFashionMnist(kFashionMnistDir, Split::kTrain, 250);
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(larger.ok()) << larger.status();
  EXPECT_EQ(small->size, 100);
  EXPECT_EQ(small->labels.size(), 100u);
  EXPECT_EQ(small->features.size(), 100u * 784u);
  EXPECT_EQ(small->num_classes, 10);
  EXPECT_EQ(small->labels[0], 9);
  EXPECT_TRUE(std::equal(small->labels.begin(), small->labels.end(), larger->labels.begin()));
  EXPECT_TRUE(std::equal(small->features.begin(), small->features.end(), larger->features.begin()));
}

TEST(FashionMnist, MissingDirectoryIsNotFoundWithInstallHint) {
  absl::StatusOr<Dataset> dataset = LoadFashionMnist("/nonexistent/fashion", Split::kTest, 0);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dataset.status().message(),
              AllOf(HasSubstr("/nonexistent/fashion/t10k-"),
                    HasSubstr("apt-get install dataset-fashion-mnist")));
}

}  // namespace
}  // namespace syncopate::data
