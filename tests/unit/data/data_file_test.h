// A test fixture for the dataset readers and writers: each test gets its own fresh directory and
// writes its input files there, plain or gzip-compressed.
// Thread-safety: thread-compatible (one test at a time).
#ifndef SYNCOPATE_TESTS_UNIT_DATA_DATA_FILE_TEST_H_
#define SYNCOPATE_TESTS_UNIT_DATA_DATA_FILE_TEST_H_

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace syncopate::data {

class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("data_file_test_", info->test_suite_name(), "_", info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string PathOf(const std::string& name) const { return (dir_ / name).string(); }

  std::string WritePlain(const std::string& name, const std::string& bytes) {
    std::string path = PathOf(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::string WriteGzip(const std::string& name, const std::string& bytes) {
    std::string path = PathOf(name);
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    EXPECT_EQ(gzclose(file), Z_OK);
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace syncopate::data

#endif  // SYNCOPATE_TESTS_UNIT_DATA_DATA_FILE_TEST_H_
