#include "libs/coordinator/progress_journal.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/checkpoint/checkpoint_store.h"

namespace syncopate::coordinator {
namespace {

v1::CoordinatorProgress Progress(int64_t examples) {
  v1::CoordinatorProgress progress;
  progress.set_job_id("job");
  progress.set_examples(examples);
  progress.set_state(v1::JOB_RUNNING);
  (*progress.mutable_worker_ids())["w1"] = 1;
  return progress;
}

std::string FreshDir(const std::string& name) {
  std::string dir = absl::StrCat(::testing::TempDir(), "/journal-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

// The contract both implementations keep: nothing saved is NOT_FOUND, the newest save wins.
template <typename T>
class ProgressJournalContract : public ::testing::Test {
 protected:
  std::unique_ptr<ProgressJournal> Make() {
    if constexpr (std::is_same_v<T, FileProgressJournal>) {
      dir_ = FreshDir("contract");
      return std::make_unique<FileProgressJournal>(dir_ + "/nested");
    } else {
      return std::make_unique<InMemoryProgressJournal>();
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

using Journals = ::testing::Types<FileProgressJournal, InMemoryProgressJournal>;
TYPED_TEST_SUITE(ProgressJournalContract, Journals);

TYPED_TEST(ProgressJournalContract, NothingSavedIsNotFoundAndTheNewestSaveWins) {
  std::unique_ptr<ProgressJournal> journal = this->Make();
  EXPECT_EQ(journal->Load().status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(journal->Save(Progress(10)).ok());
  ASSERT_TRUE(journal->Save(Progress(20)).ok());
  absl::StatusOr<v1::CoordinatorProgress> loaded = journal->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->examples(), 20);
  EXPECT_EQ(loaded->job_id(), "job");
  EXPECT_EQ(loaded->worker_ids().at("w1"), 1);
}

TEST(FileProgressJournal, SurvivesTheObjectAndCreatesItsDirectory) {
  const std::string dir = FreshDir("reopen");
  ASSERT_TRUE(FileProgressJournal(dir + "/a/b").Save(Progress(7)).ok());
  FileProgressJournal reopened(dir + "/a/b");
  EXPECT_EQ(reopened.path(), dir + "/a/b/coordinator.state");
  absl::StatusOr<v1::CoordinatorProgress> loaded = reopened.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->examples(), 7);
  std::filesystem::remove_all(dir);
}

TEST(FileProgressJournal, ACorruptOrForeignFileIsDataLoss) {
  const std::string dir = FreshDir("corrupt");
  FileProgressJournal journal(dir);
  ASSERT_TRUE(journal.Save(Progress(7)).ok());
  {
    std::fstream file(journal.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(20);
    file.put('\x7f');  // inside the payload: the checksum no longer matches
  }
  EXPECT_EQ(journal.Load().status().code(), absl::StatusCode::kDataLoss);
  // Framed and checksummed, but not a progress record (an unterminated varint).
  ASSERT_TRUE(checkpoint::WriteFramedFile(journal.path(), "\xff\xff").ok());
  absl::Status foreign = journal.Load().status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(foreign.message().find("does not parse"), absl::string_view::npos) << foreign;
  std::filesystem::remove_all(dir);
}

TEST(InMemoryProgressJournal, CountsSaves) {
  InMemoryProgressJournal journal;
  EXPECT_EQ(journal.saves(), 0);
  ASSERT_TRUE(journal.Save(Progress(1)).ok());
  ASSERT_TRUE(journal.Save(Progress(2)).ok());
  EXPECT_EQ(journal.saves(), 2);
}

}  // namespace
}  // namespace syncopate::coordinator
