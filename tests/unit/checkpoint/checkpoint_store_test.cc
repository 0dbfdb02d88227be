#include "libs/checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/tensor/packed.h"

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

std::vector<std::string> CheckpointFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".ckpt") files.push_back(e.path().filename());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Scenario: a shard's process is replaced while it is frozen (its node lost); the replacement
// claims the directory. The stale process, thawed, writes nothing and prunes nothing: the
// directory keeps the replacement's checkpoints, whose versions are lower than the stale one's.
TEST(ShardClaim, TheNewestClaimWinsAndAStaleWriterLeavesNothingOnDisk) {
  const std::string dir = TempDir("claim");
  absl::StatusOr<ShardClaim> stale = ShardClaim::Take(dir, 0, "node-1 pid 1");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_TRUE(stale->Check().ok());
  CheckpointStore store(dir);
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 100), &*stale).ok());

  absl::StatusOr<ShardClaim> replacement = ShardClaim::Take(dir, 0, "node-2 pid 1");
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 101), &*replacement).ok());
  ASSERT_TRUE(store.Save(Checkpoint(0, 1, 102), &*replacement).ok());

  const absl::Status lost = stale->Check();
  EXPECT_TRUE(ShardClaim::IsSuperseded(lost)) << lost;
  EXPECT_THAT(std::string(lost.message()), testing::HasSubstr("node-2 pid 1"));
  // Version 250 would be the newest on disk and prune 101 and 102; 101 would replace theirs.
  for (int64_t version : {250, 101}) {
    const absl::Status saved = store.Save(Checkpoint(0, 1, version), &*stale);
    EXPECT_TRUE(ShardClaim::IsSuperseded(saved)) << saved;
  }
  EXPECT_THAT(CheckpointFiles(dir), testing::ElementsAre("shard-0-of-1-v000000000101.ckpt",
                                                         "shard-0-of-1-v000000000102.ckpt"));
  EXPECT_EQ(store.LoadLatest(0, 1)->version(), 102);
  // No temporary file left either.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 3);  // two checkpoints and the claim
  EXPECT_TRUE(replacement->Check().ok());
}

// Fail closed: a claim file that is gone or is not a claim supersedes its holder; every claim of
// one holder name is still distinct.
TEST(ShardClaim, AMissingOrForeignClaimFileSupersedesAndTokensAreDistinct) {
  const std::string dir = TempDir("claim-gone");
  absl::StatusOr<ShardClaim> claim = ShardClaim::Take(dir, 3, "host pid 7");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->path(), dir + "/shard-3.claim");
  absl::StatusOr<ShardClaim> again = ShardClaim::Take(dir, 3, "host pid 7");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(claim->token(), again->token());
  EXPECT_TRUE(ShardClaim::IsSuperseded(claim->Check()));
  std::filesystem::remove(again->path());
  EXPECT_TRUE(ShardClaim::IsSuperseded(again->Check()));
  std::ofstream(again->path()) << "not a claim";
  EXPECT_TRUE(ShardClaim::IsSuperseded(again->Check()));
  // Another shard's claim in the same directory is its own.
  absl::StatusOr<ShardClaim> other = ShardClaim::Take(dir, 4, "host pid 8");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->Check().ok());
  // An unreadable directory says nothing about the claim: UNAVAILABLE, not superseded.
  std::filesystem::remove_all(dir);
  const absl::Status gone = other->Check();
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable) << gone;
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

TEST(CheckpointStore, ReadsTheFormatOfEarlierReleases) {
  const std::string dir = TempDir("format1");
  std::filesystem::create_directories(dir);
  v1::ShardCheckpoint old = Checkpoint(0, 1, 3);
  v1::EmbeddingSlice* table = old.add_embeddings();
  table->set_table("deep");
  table->set_dim(1);
  const std::vector<uint64_t> keys = {9, 2};
  table->set_keys(tensor::PackKeys(keys));
  table->set_values(tensor::PackFloats(std::vector<float>{0.5f, -0.5f}));
  // Format 1: the whole message framed once (what WriteCheckpointFile wrote before issue 41).
  ASSERT_TRUE(WriteFramedFile(dir + "/old.ckpt", old.SerializeAsString()).ok());
  auto read = ReadCheckpointFile(dir + "/old.ckpt");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->slices(0).values(), old.slices(0).values());
  EXPECT_EQ(read->embeddings(0).keys(), old.embeddings(0).keys());
  auto reader = CheckpointReader::Open(dir + "/old.ckpt");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->format(), 1);
  ASSERT_EQ((*reader)->header().table_rows_size(), 1);
  EXPECT_EQ((*reader)->header().table_rows(0).rows(), 2);
}

// A table of 400k rows (over kRecordBytes of rows and Adagrad state) in two unsorted slices and a
// dense tensor of 5M floats: written as several records, each table's rows in key order, read
// back whole and fragment by fragment.
TEST(CheckpointStore, WritesLargeStateInSortedRecordsAndReadsItBack) {
  const std::string dir = TempDir("large");
  std::filesystem::create_directories(dir);
  v1::ShardCheckpoint c = Checkpoint(0, 1, 4);
  v1::CheckpointSlice* dense = c.mutable_slices(0);
  std::vector<float> weights(5'000'000);
  std::iota(weights.begin(), weights.end(), 0.0f);
  dense->set_length(static_cast<int64_t>(weights.size()));
  dense->set_values(tensor::PackFloats(weights));
  dense->add_optimizer_state(tensor::PackFloats(weights));
  std::mt19937_64 random(7);
  constexpr int kDim = 4;
  std::vector<uint64_t> all_keys;
  for (int part = 0; part < 2; ++part) {
    std::vector<uint64_t> keys;
    std::vector<float> values, state;
    for (int i = 0; i < 200'000; ++i) {
      const uint64_t key = random();
      keys.push_back(key);
      all_keys.push_back(key);
      for (int j = 0; j < kDim; ++j) {
        values.push_back(static_cast<float>(key % 1000) + static_cast<float>(j));
        state.push_back(static_cast<float>(j));
      }
    }
    v1::EmbeddingSlice* slice = c.add_embeddings();
    slice->set_table("deep");
    slice->set_dim(kDim);
    slice->set_keys(tensor::PackKeys(keys));
    slice->set_values(tensor::PackFloats(values));
    slice->add_optimizer_state(tensor::PackFloats(state));
  }
  const std::string path = dir + "/large.ckpt";
  ASSERT_TRUE(WriteCheckpointFile(path, c).ok());

  auto reader = CheckpointReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->format(), 2);
  ASSERT_EQ((*reader)->header().table_rows_size(), 1);
  EXPECT_EQ((*reader)->header().table_rows(0).rows(), 400'000);
  int dense_records = 0, table_records = 0;
  std::vector<uint64_t> streamed;
  std::vector<uint64_t> keys;
  std::vector<float> row(kDim);
  v1::ShardCheckpoint fragment;
  while (true) {
    auto more = (*reader)->Next(fragment);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    dense_records += fragment.slices_size();
    for (const v1::EmbeddingSlice& chunk : fragment.embeddings()) {
      ++table_records;
      EXPECT_LE(static_cast<int64_t>(chunk.values().size()), kRecordBytes);
      ASSERT_TRUE(tensor::UnpackKeys(chunk.keys(), keys).ok());
      // Rows travel with their keys.
      ASSERT_TRUE(tensor::UnpackFloatsInto(chunk.values().substr(0, kDim * 4), row).ok());
      EXPECT_EQ(row[1], static_cast<float>(keys[0] % 1000) + 1.0f);
      streamed.insert(streamed.end(), keys.begin(), keys.end());
    }
  }
  EXPECT_GE(dense_records, 2);
  EXPECT_GE(table_records, 2);
  std::sort(all_keys.begin(), all_keys.end());
  EXPECT_EQ(streamed, all_keys);

  auto read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<float> values(weights.size());
  int64_t covered = 0;
  for (const v1::CheckpointSlice& slice : read->slices()) {
    std::vector<float> part(static_cast<size_t>(slice.length()));
    ASSERT_TRUE(tensor::UnpackFloatsInto(slice.values(), part).ok());
    std::copy(part.begin(), part.end(), values.begin() + slice.tensor_offset());
    covered += slice.length();
  }
  EXPECT_EQ(covered, static_cast<int64_t>(weights.size()));
  EXPECT_EQ(values, weights);
}

TEST(CheckpointStore, RefusesToWriteAKeyTwice) {
  const std::string dir = TempDir("twice");
  std::filesystem::create_directories(dir);
  v1::ShardCheckpoint c = Checkpoint(0, 1, 1);
  for (int part = 0; part < 2; ++part) {
    v1::EmbeddingSlice* slice = c.add_embeddings();
    slice->set_table("deep");
    slice->set_dim(1);
    slice->set_keys(tensor::PackKeys(std::vector<uint64_t>{5}));
    slice->set_values(tensor::PackFloats(std::vector<float>{1.0f}));
  }
  const absl::Status written = WriteCheckpointFile(dir + "/twice.ckpt", c);
  EXPECT_EQ(written.code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(std::filesystem::exists(dir + "/twice.ckpt"));
}

}  // namespace
}  // namespace syncopate::checkpoint
