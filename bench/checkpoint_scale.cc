// `./dev scale`: the checkpoint and export formats at sizes the tests cannot hold (issue 41 item
// 2).
//   shard mode: one real ShardCore holding an Adagrad table of --rows x --dim (more than 2 GiB of
//     state at the default 20M x 16): whether protobuf can serialize its state as one message
//     (format 1 could not), then the time and size of a format 2 checkpoint, and a fresh shard's
//     restore of it, rows checked.
//   write mode: --shards format 2 files holding --rows rows of a dim --dim table between them
//     (parameters only, as a kept version), for `syncopate export` to merge (bench/scale.sh).
// Prints key=value lines. Thread-safety: a single-threaded program.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/clock.h"
#include "libs/embedding/owner_shard.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"

ABSL_FLAG(std::string, mode, "shard", "shard | write");
ABSL_FLAG(int64_t, rows, 20'000'000, "embedding rows");
ABSL_FLAG(int, dim, 16, "embedding width");
ABSL_FLAG(int, shards, 3, "write: shard files");
ABSL_FLAG(std::string, dir, "", "where the checkpoint files go (required)");

namespace syncopate {
namespace {

double PeakRssGib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1 << 20);  // KiB -> GiB
}

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// The value of element j of key k's row: checkable after a round trip without keeping a copy.
float Value(uint64_t key, int j) { return static_cast<float>(key % 1000003) + 0.5f * j; }

// Random keys (a click log's hashed ids) with their rows, `count` of them, owned by `shard`.
v1::EmbeddingSlice Rows(int64_t count, int dim, int shard, int shards, bool with_state,
                        uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> keys;
  std::vector<float> values, state;
  keys.reserve(static_cast<size_t>(count));
  values.reserve(static_cast<size_t>(count) * dim);
  while (static_cast<int64_t>(keys.size()) < count) {
    const uint64_t key = random();
    if (embedding::OwnerShard(key, shards) != shard) continue;
    keys.push_back(key);
    for (int j = 0; j < dim; ++j) values.push_back(Value(key, j));
  }
  v1::EmbeddingSlice slice;
  slice.set_table("deep");
  slice.set_dim(dim);
  slice.set_keys(tensor::PackKeys(keys));
  keys = {};
  slice.set_values(tensor::PackFloats(values));
  if (with_state) {
    values.assign(values.size(), 0.1f);
    slice.add_optimizer_state(tensor::PackFloats(values));
  }
  return slice;
}

v1::ShardAssignment Assignment(int dim) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.set_job_id("scale");
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::ADAGRAD);
  job.mutable_optimizer()->set_learning_rate(0.1f);
  job.set_global_batch(4);
  job.set_num_workers(1);
  job.set_num_shards(1);
  job.set_mode(v1::MODE_SYNC);
  job.set_seed(1);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_flat_begin(0);
  p.set_flat_end(1);
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor("w");
  slice->set_length(1);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  v1::EmbeddingTableSpec* table = p.add_tables();
  table->set_name("deep");
  table->set_dim(dim);
  table->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  table->mutable_init()->set_scale(0.05);
  a.mutable_membership()->add_worker_ids(1);
  a.mutable_membership()->set_local_batch(4);
  a.set_mode(v1::MODE_SYNC);
  return a;
}

int Fail(absl::string_view what, const absl::Status& status) {
  fprintf(stderr, "checkpoint_scale: %s: %s\n", std::string(what).c_str(),
          std::string(status.message()).c_str());
  return 1;
}

int ShardMode(int64_t rows, int dim, const std::string& dir) {
  const v1::ShardAssignment assignment = Assignment(dim);
  absl::Time start = absl::Now();
  auto core = shard::ShardCore::Create(assignment, Clock::Real(), nullptr);
  if (!core.ok()) return Fail("create", core.status());
  {
    // The shard's state comes from a checkpoint of random rows (a restore is the fastest way to
    // fill a real table); the source is dropped once restored.
    std::vector<v1::ShardCheckpoint> sources(1);
    v1::ShardCheckpoint& source = sources[0];
    source.set_job_id("scale");
    source.set_num_shards(1);
    source.set_optimizer("adagrad");
    v1::CheckpointSlice* w = source.add_slices();
    w->set_tensor("w");
    w->set_length(1);
    w->set_values(tensor::PackFloats(std::vector<float>{0.0f}));
    w->add_optimizer_state(tensor::PackFloats(std::vector<float>{0.1f}));
    *source.add_embeddings() = Rows(rows, dim, 0, 1, /*with_state=*/true, 7);
    if (absl::Status restored = (*core)->Restore(sources); !restored.ok()) {
      return Fail("fill", restored);
    }
  }
  printf("rows=%ld dim=%d fill_seconds=%.1f\n", static_cast<long>(rows), dim, Seconds(start));
  start = absl::Now();
  const v1::ShardCheckpoint snapshot = (*core)->Snapshot();
  const double snapshot_seconds = Seconds(start);
  const uint64_t bytes = snapshot.ByteSizeLong();
  // Format 1 was this message, serialized whole: protobuf refuses anything over 2 GiB.
  std::string one_message;
  const bool format1 = bytes < (uint64_t{1} << 31) && snapshot.SerializeToString(&one_message);
  one_message = {};
  printf("state_bytes=%lu state_gib=%.2f format1_possible=%s snapshot_seconds=%.1f\n",
         static_cast<unsigned long>(bytes), static_cast<double>(bytes) / (1 << 30),
         format1 ? "yes" : "no", snapshot_seconds);
  start = absl::Now();
  checkpoint::CheckpointStore store(dir);
  if (absl::Status saved = store.Save(snapshot); !saved.ok()) return Fail("save", saved);
  const double save_seconds = Seconds(start);
  uint64_t file_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    file_bytes += entry.file_size();
  printf("save_seconds=%.1f file_gib=%.2f\n", save_seconds,
         static_cast<double>(file_bytes) / (1 << 30));
  core->reset();  // the restore below is a fresh process's

  start = absl::Now();
  auto fresh = shard::ShardCore::Create(assignment, Clock::Real(), nullptr);
  if (!fresh.ok()) return Fail("create", fresh.status());
  {
    auto loaded = store.LoadLatest(0, 1);
    if (!loaded.ok()) return Fail("load", loaded.status());
    std::vector<v1::ShardCheckpoint> sources;
    sources.push_back(*std::move(loaded));
    if (absl::Status restored = (*fresh)->Restore(sources); !restored.ok()) {
      return Fail("restore", restored);
    }
  }
  const double restore_seconds = Seconds(start);
  const int64_t restored_rows = (*fresh)->Stats().embedding_rows;
  // Spot checks: rows of keys the generator made.
  std::mt19937_64 random(7);
  int checked = 0, wrong = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t key = random();
    const std::vector<float> row = (*fresh)->EmbeddingRow(0, key);
    ++checked;
    for (int j = 0; j < dim; ++j) wrong += row[static_cast<size_t>(j)] != Value(key, j) ? 1 : 0;
  }
  printf(
      "restore_seconds=%.1f restored_rows=%ld rows_checked=%d wrong_values=%d peak_rss_gib=%.2f\n",
      restore_seconds, static_cast<long>(restored_rows), checked, wrong, PeakRssGib());
  return restored_rows == rows && wrong == 0 ? 0 : 1;
}

int WriteMode(int64_t rows, int dim, int shards, const std::string& dir) {
  const absl::Time start = absl::Now();
  v1::JobSpec job = Assignment(dim).job();
  job.mutable_model()->set_kind(v1::ModelSpec::TORCH);
  job.mutable_model()->mutable_torch()->set_module("scale.py");
  v1::TensorShape* w = job.mutable_model()->mutable_layout()->add_dense();
  w->set_name("w");
  w->add_shape(1);
  v1::TableShape* table = job.mutable_model()->mutable_layout()->add_tables();
  table->set_name("deep");
  table->set_dim(dim);
  table->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  table->mutable_init()->set_scale(0.05);
  job.set_num_shards(shards);
  checkpoint::CheckpointStore store(dir);
  for (int s = 0; s < shards; ++s) {
    v1::ShardCheckpoint c;
    c.set_job_id("scale");
    c.set_shard_id(s);
    c.set_num_shards(shards);
    c.set_version(1);
    c.set_optimizer(checkpoint::kParametersOnly);
    *c.mutable_job() = job;
    if (s == 0) {
      v1::CheckpointSlice* slice = c.add_slices();
      slice->set_tensor("w");
      slice->set_length(1);
      slice->set_values(tensor::PackFloats(std::vector<float>{1.0f}));
    }
    const int64_t mine = rows / shards + (s < rows % shards ? 1 : 0);
    *c.add_embeddings() = Rows(mine, dim, s, shards, /*with_state=*/false, 100 + s);
    if (absl::Status saved = store.Save(c); !saved.ok()) return Fail("save", saved);
  }
  printf("wrote_rows=%ld shards=%d write_seconds=%.1f peak_rss_gib=%.2f\n", static_cast<long>(rows),
         shards, Seconds(start), PeakRssGib());
  return 0;
}

}  // namespace
}  // namespace syncopate

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    fprintf(stderr, "checkpoint_scale: --dir is required\n");
    return 2;
  }
  std::filesystem::create_directories(dir);
  if (absl::GetFlag(FLAGS_mode) == "shard") {
    return syncopate::ShardMode(absl::GetFlag(FLAGS_rows), absl::GetFlag(FLAGS_dim), dir);
  }
  if (absl::GetFlag(FLAGS_mode) == "write") {
    return syncopate::WriteMode(absl::GetFlag(FLAGS_rows), absl::GetFlag(FLAGS_dim),
                                absl::GetFlag(FLAGS_shards), dir);
  }
  fprintf(stderr, "checkpoint_scale: --mode must be shard or write\n");
  return 2;
}
