#include "libs/model_export/exporter.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/clock.h"
#include "libs/embedding/owner_shard.h"
#include "libs/job/partitioner.h"
#include "libs/model_export/array_files.h"
#include "libs/model_export/export_reader.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"

namespace syncopate::model_export {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(testing::TempDir(), "/export-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A PyTorch-shaped job: two parameters, a buffer, and two tables (one that admits keys).
v1::JobSpec Job() {
  v1::JobSpec job;
  job.set_job_id("export-test");
  job.set_seed(11);
  job.mutable_model()->set_kind(v1::ModelSpec::TORCH);
  job.mutable_model()->mutable_torch()->set_module("model.py");
  v1::ModelLayoutRecord* layout = job.mutable_model()->mutable_layout();
  v1::TensorShape* w = layout->add_dense();
  w->set_name("fc.weight");
  w->add_shape(3);
  w->add_shape(5);
  v1::TensorShape* b = layout->add_dense();
  b->set_name("fc.bias");
  b->add_shape(3);
  v1::TensorShape* mean = layout->add_dense();
  mean->set_name("bn.running_mean");
  mean->add_shape(5);
  mean->set_buffer(true);
  mean->set_dtype("float32");
  v1::TableShape* ids = layout->add_tables();
  ids->set_name("ids");
  ids->set_dim(4);
  ids->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  ids->mutable_init()->set_scale(0.05);
  v1::TableShape* rare = layout->add_tables();
  rare->set_name("rare/ids");
  rare->set_dim(2);
  rare->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  rare->mutable_init()->set_scale(0.05);
  rare->set_admit_after_count(3);
  return job;
}

// The state every set below holds: dense values 0..22 and rows of keys 1..n.
constexpr int kDense = 3 * 5 + 3 + 5;

// The same state cut as `shards` shards cut it (the partitioner's dense ranges, OwnerShard's rows),
// written as a checkpoint directory.
void WriteSet(const v1::JobSpec& job, int shards, const std::string& dir, int64_t version,
              int64_t rows = 1000, bool kept = false, int64_t eval_point = 0) {
  std::vector<model::DenseTensorSpec> tensors;
  for (const v1::TensorShape& t : job.model().layout().dense()) {
    int64_t size = 1;
    for (int64_t d : t.shape()) size *= d;
    tensors.push_back({.name = t.name(), .rows = size, .cols = 1, .init = {}});
  }
  auto partitions = job::PartitionDense(tensors, shards);
  ASSERT_TRUE(partitions.ok());
  checkpoint::CheckpointStore store(dir);
  for (int s = 0; s < shards; ++s) {
    v1::ShardCheckpoint c;
    c.set_job_id(job.job_id());
    c.set_shard_id(s);
    c.set_num_shards(shards);
    c.set_version(version);
    c.set_optimizer(kept ? checkpoint::kParametersOnly : "sgd");
    c.set_eval_point(eval_point);
    *c.mutable_job() = job;
    c.mutable_job()->set_num_shards(shards);
    for (const v1::TensorSlice& slice : (*partitions)[s].slices()) {
      std::vector<float> values;
      for (int64_t i = 0; i < slice.length(); ++i) {
        values.push_back(static_cast<float>(slice.flat_offset() + i));
      }
      v1::CheckpointSlice* out = c.add_slices();
      out->set_tensor(slice.tensor());
      out->set_tensor_offset(slice.tensor_offset());
      out->set_length(slice.length());
      out->set_values(tensor::PackFloats(values));
    }
    for (const v1::TableShape& table : job.model().layout().tables()) {
      std::vector<uint64_t> keys;
      std::vector<float> values;
      // Keys in descending order: the writer sorts them.
      for (int64_t k = rows; k >= 1; --k) {
        const uint64_t key = static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull;
        if (embedding::OwnerShard(key, shards) != s) continue;
        keys.push_back(key);
        for (int j = 0; j < table.dim(); ++j) values.push_back(static_cast<float>(k) + 0.25f * j);
      }
      v1::EmbeddingSlice* out = c.add_embeddings();
      out->set_table(table.name());
      out->set_dim(table.dim());
      out->set_keys(tensor::PackKeys(keys));
      out->set_values(tensor::PackFloats(values));
    }
    ASSERT_TRUE(store.Save(c).ok());
  }
}

std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    files[std::filesystem::relative(entry.path(), dir).string()] = bytes.str();
  }
  return files;
}

TEST(Export, TheSameStateFromTwoAndThreeShardsIsTheSameExport) {
  const v1::JobSpec job = Job();
  const std::string two = TempDir("two"), three = TempDir("three");
  WriteSet(job, 2, two + "/ckpt", 40);
  WriteSet(job, 3, three + "/ckpt", 40);
  std::filesystem::create_directories(two + "/out");
  std::filesystem::create_directories(three + "/out");
  auto a = WriteExport({.from = two + "/ckpt", .chunk_rows = 300}, two + "/out");
  auto b = WriteExport({.from = three + "/ckpt", .chunk_rows = 300}, three + "/out");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const auto files = Files(two + "/out");
  EXPECT_EQ(files, Files(three + "/out"));
  // 1000 rows in chunks of 300: four chunks per table, each table in its own directory.
  EXPECT_EQ(files.count("tables/ids/keys-00003.npy"), 1u);
  EXPECT_EQ(files.count("tables/rare_ids/rows-00003.npy"), 1u);
  EXPECT_EQ(files.count("manifest.json"), 1u);
  EXPECT_EQ(files.count("job.textproto"), 1u);
  ASSERT_EQ(a->tables_size(), 2);
  EXPECT_EQ(a->tables(0).count(), 1000);
  EXPECT_EQ(a->tables(0).absent_rows(), "initial");
  EXPECT_EQ(a->tables(1).absent_rows(), "zeros");
  EXPECT_EQ(a->source(), "latest");
  ASSERT_EQ(a->versions_size(), 1);
  EXPECT_EQ(a->versions(0), 40);
  ASSERT_EQ(a->dense_size(), 3);
  EXPECT_EQ(a->dense(2).role(), "buffer");
  EXPECT_EQ(a->dense(0).shape(0), 3);  // a PyTorch module's own shape
}

TEST(Export, TablesComeOutSortedWithTheirRowsAndTheDenseByName) {
  const v1::JobSpec job = Job();
  const std::string dir = TempDir("sorted");
  WriteSet(job, 3, dir + "/ckpt", 7);
  std::filesystem::create_directories(dir + "/out");
  auto manifest = WriteExport({.from = dir + "/ckpt", .chunk_rows = 256}, dir + "/out");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  uint64_t previous = 0;
  int64_t seen = 0;
  for (const v1::ExportChunk& chunk : manifest->tables(0).chunks()) {
    auto keys_header = ReadNpyHeader(dir + "/out/" + chunk.keys());
    auto rows_header = ReadNpyHeader(dir + "/out/" + chunk.rows());
    ASSERT_TRUE(keys_header.ok() && rows_header.ok());
    ASSERT_EQ(rows_header->shape, (std::vector<int64_t>{chunk.count(), 4}));
    std::vector<uint64_t> keys(static_cast<size_t>(chunk.count()));
    std::vector<float> rows(keys.size() * 4);
    ASSERT_TRUE(
        ReadNpy(dir + "/out/" + chunk.keys(), *keys_header, 0, std::span<uint64_t>(keys)).ok());
    ASSERT_TRUE(
        ReadNpy(dir + "/out/" + chunk.rows(), *rows_header, 0, std::span<float>(rows)).ok());
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_GT(keys[i], previous);
      previous = keys[i];
      // Key k * golden has row k, k + .25, ...: find k back.
      const uint64_t k = static_cast<uint64_t>(rows[i * 4]);
      EXPECT_EQ(keys[i], k * 0x9e3779b97f4a7c15ull);
      EXPECT_EQ(rows[i * 4 + 3], static_cast<float>(k) + 0.75f);
    }
    seen += chunk.count();
  }
  EXPECT_EQ(seen, 1000);
  auto dense = ReadSafetensors(dir + "/out/dense.safetensors");
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_EQ(dense->size(), 3u);
  EXPECT_EQ((*dense)[1].name, "fc.bias");
  EXPECT_EQ((*dense)[1].values, (std::vector<float>{15, 16, 17}));
  auto reread = ReadManifest(dir + "/out");
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->SerializeAsString(), manifest->SerializeAsString());
}

TEST(Export, AKeptSetOfDifferentEvaluationPointsIsRefusedInOneLine) {
  const v1::JobSpec job = Job();
  const std::string dir = TempDir("kept");
  WriteSet(job, 2, dir + "/kept", 30, 100, /*kept=*/true, /*eval_point=*/6);
  // Shard 1 wrote a newer point; shard 0 failed before it could.
  const std::string newer = TempDir("kept-newer");
  WriteSet(job, 2, newer, 36, 100, true, 7);
  std::filesystem::copy(newer + "/shard-1-of-2-v000000000036.ckpt",
                        dir + "/kept/shard-1-of-2-v000000000036.ckpt");
  std::filesystem::create_directories(dir + "/out");
  auto refused = WriteExport({.from = dir + "/kept"}, dir + "/out");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("different kept evaluation points"), std::string::npos)
      << refused.status();
  EXPECT_EQ(refused.status().message().find('\n'), std::string::npos);
  // The consistent set exports, and says it is the kept version.
  std::filesystem::remove(dir + "/kept/shard-1-of-2-v000000000036.ckpt");
  auto kept = WriteExport({.from = dir + "/kept"}, dir + "/out");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->source(), "kept");
  EXPECT_EQ(kept->eval_point(), 6);
}

TEST(Export, BadSourcesAreOneLineEach) {
  const v1::JobSpec job = Job();
  const std::string dir = TempDir("bad");
  std::filesystem::create_directories(dir + "/out");
  auto empty = WriteExport({.from = dir + "/none"}, dir + "/out");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition);

  // A checkpoint of a model with another layout.
  v1::JobSpec other = job;
  other.mutable_model()->mutable_layout()->mutable_dense(0)->set_shape(1, 6);
  WriteSet(job, 2, dir + "/layout", 3);
  const std::string path = dir + "/layout/shard-0-of-2-v000000000003.ckpt";
  auto c = checkpoint::ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok());
  *c->mutable_job() = other;
  ASSERT_TRUE(checkpoint::WriteCheckpointFile(path, *c).ok());
  auto layout = WriteExport({.from = dir + "/layout"}, dir + "/out");
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kFailedPrecondition) << layout.status();

  // A truncated file.
  WriteSet(job, 2, dir + "/cut", 3);
  const std::string cut = dir + "/cut/shard-1-of-2-v000000000003.ckpt";
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 10);
  auto truncated = WriteExport({.from = dir + "/cut"}, dir + "/out");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  EXPECT_NE(truncated.status().message().find(cut), std::string::npos);

  // Checkpoints from before the export format carry no job spec.
  WriteSet(job, 1, dir + "/old", 3);
  const std::string old = dir + "/old/shard-0-of-1-v000000000003.ckpt";
  auto o = checkpoint::ReadCheckpointFile(old);
  o->clear_job();
  ASSERT_TRUE(checkpoint::WriteCheckpointFile(old, *o).ok());
  auto no_job = WriteExport({.from = dir + "/old"}, dir + "/out");
  EXPECT_EQ(no_job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_job.status().message().find("--job"), std::string::npos);
  std::filesystem::remove_all(dir + "/out");
  std::filesystem::create_directories(dir + "/out");
  auto with_job = WriteExport({.from = dir + "/old", .job = &job}, dir + "/out");
  EXPECT_TRUE(with_job.ok()) << with_job.status();
}

// A warm start from an export of 2 shards' checkpoints onto 3 shards with another optimizer holds
// exactly the exported parameters, rows and buffers at version 0, with fresh optimizer state:
// evaluated before its first update it scores what the source scored.
TEST(Export, AWarmStartHoldsTheExportedParametersExactly) {
  v1::JobSpec job = Job();
  const std::string dir = TempDir("warm");
  WriteSet(job, 2, dir + "/ckpt", 40, 500);
  std::filesystem::create_directories(dir + "/out");
  ASSERT_TRUE(WriteExport({.from = dir + "/ckpt"}, dir + "/out").ok());
  auto exported = ExportedModel::Open(dir + "/out");
  ASSERT_TRUE(exported.ok()) << exported.status();
  auto sources = LoadParameters(dir + "/out");
  ASSERT_TRUE(sources.ok()) << sources.status();

  job.set_num_shards(3);
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::ADAGRAD);
  job.mutable_optimizer()->set_learning_rate(0.1f);
  job.set_global_batch(4);
  job.set_mode(v1::MODE_SYNC);
  std::vector<model::DenseTensorSpec> tensors;
  v1::Initializer zeros;
  zeros.set_kind(v1::Initializer::ZEROS);
  for (const v1::TensorShape& t : job.model().layout().dense()) {
    int64_t size = 1;
    for (int64_t d : t.shape()) size *= d;
    tensors.push_back(
        {.name = t.name(), .rows = size, .cols = 1, .init = zeros, .buffer = t.buffer()});
  }
  auto partitions = job::PartitionDense(tensors, 3);
  ASSERT_TRUE(partitions.ok());
  FakeClock clock;
  for (int s = 0; s < 3; ++s) {
    v1::ShardAssignment assignment;
    *assignment.mutable_job() = job;
    *assignment.mutable_partition() = (*partitions)[s];
    for (const v1::TableShape& t : job.model().layout().tables()) {
      v1::EmbeddingTableSpec* table = assignment.mutable_partition()->add_tables();
      table->set_name(t.name());
      table->set_dim(t.dim());
      *table->mutable_init() = t.init();
      table->set_admit_after_count(t.admit_after_count());
    }
    assignment.mutable_membership()->add_worker_ids(1);
    assignment.mutable_membership()->set_local_batch(4);
    assignment.set_mode(v1::MODE_SYNC);
    auto core = shard::ShardCore::Create(assignment, &clock, nullptr);
    ASSERT_TRUE(core.ok()) << core.status();
    ASSERT_TRUE((*core)->WarmStart(*sources).ok());
    const v1::ShardPartition& p = (*partitions)[s];
    const std::vector<float> expected(exported->dense().begin() + p.flat_begin(),
                                      exported->dense().begin() + p.flat_end());
    EXPECT_EQ((*core)->Parameters(), expected) << "shard " << s;
    EXPECT_EQ((*core)->Stats().version, 0);
    // The rows this shard owns: the export's, bit for bit.
    int owned = 0;
    for (uint64_t k = 1; k <= 500; ++k) {
      const uint64_t key = k * 0x9e3779b97f4a7c15ull;
      if (embedding::OwnerShard(key, 3) != s) continue;
      ++owned;
      std::vector<float> row(4);
      ASSERT_TRUE(exported->LookUp(0, std::span<const uint64_t>(&key, 1), row).ok());
      EXPECT_EQ((*core)->EmbeddingRow(0, key), row);
    }
    EXPECT_GT(owned, 100);
    // Fresh Adagrad state: every slot at the initial accumulator.
    const v1::ShardCheckpoint snapshot = (*core)->Snapshot();
    std::vector<float> slot(static_cast<size_t>(snapshot.slices(0).length()));
    ASSERT_TRUE(tensor::UnpackFloatsInto(snapshot.slices(0).optimizer_state(0), slot).ok());
    EXPECT_EQ(slot.front(), 0.1f);
  }
}

}  // namespace
}  // namespace syncopate::model_export
