#include "libs/checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace syncopate::checkpoint {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(testing::TempDir(), "/ckpt-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

v1::ShardCheckpoint Checkpoint(int shard, int shards, int64_t version) {
  v1::ShardCheckpoint c;
  c.set_job_id("job");
  c.set_shard_id(shard);
  c.set_num_shards(shards);
  c.set_version(version);
  v1::CheckpointSlice* s = c.add_slices();
  s->set_tensor("w");
  s->set_length(1);
  s->set_values(std::string("\x00\x00\x80\x3f", 4));  // 1.0f
  return c;
}

std::string Only(const std::string& dir, const std::string& contains) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().find(contains) != std::string::npos) return e.path();
  }
  return "";
}

TEST(CheckpointStore, RoundTripsAndKeepsTheNewestTwo) {
  CheckpointStore store(TempDir("keep"));
  for (int64_t v : {10, 20, 30}) ASSERT_TRUE(store.Save(Checkpoint(0, 2, v)).ok());
  auto latest = store.LoadLatest(0, 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version(), 30);
  EXPECT_EQ(latest->slices(0).values(), Checkpoint(0, 2, 30).slices(0).values());
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(store.dir())) ++files;
  EXPECT_EQ(files, CheckpointStore::kKeep);
}

TEST(CheckpointStore, RefusesACorruptNewestFileAndFallsBackToThePreviousOne) {
  CheckpointStore store(TempDir("corrupt"));
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 1)).ok());
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 2)).ok());
  const std::string newest = Only(store.dir(), "v000000000002");
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');  // flip a payload byte
  }
  EXPECT_EQ(ReadCheckpointFile(newest).status().code(), absl::StatusCode::kDataLoss);
  std::vector<std::string> refused;
  auto loaded = store.LoadLatest(0, 1, &refused);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->version(), 1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("checksum"), std::string::npos) << refused[0];
}

TEST(CheckpointStore, RefusesTruncatedAndForeignFiles) {
  const std::string dir = TempDir("truncated");
  CheckpointStore store(dir);
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 5)).ok());
  const std::string path = Only(dir, "v000000000005");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  auto truncated = ReadCheckpointFile(path);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos);
  std::ofstream(dir + "/foreign") << "hello";
  EXPECT_EQ(ReadCheckpointFile(dir + "/foreign").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCheckpointFile(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.LoadLatest(0, 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointStore, LatestLayoutNeedsEveryShardOfIt) {
  CheckpointStore store(TempDir("layout"));
  ASSERT_TRUE(store.Save(Checkpoint(0, 2, 7)).ok());
  ASSERT_TRUE(store.Save(Checkpoint(1, 2, 7)).ok());
  ASSERT_TRUE(store.Save(Checkpoint(0, 3, 9)).ok());  // an incomplete, newer 3-shard layout
  auto layout = store.LoadLatestLayout();
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->size(), 2u);
  EXPECT_EQ((*layout)[1].shard_id(), 1);
}

}  // namespace
}  // namespace syncopate::checkpoint
