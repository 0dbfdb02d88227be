// Real processes on loopback train wide & deep on generated Criteo-format data: embedding rows
// pulled and pushed over the Train streams, aggregated in gba, checkpointed and restored.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/data/criteo_reader.h"
#include "libs/datagen/ctr_generator.h"
#include "libs/shard/shard_core.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::Options;
using testing::TestRunDir;
using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

// A small CTR job on `train_rows` (20k) generated rows, Adagrad: wide & deep with the teacher's
// crosses (hashed crosses stay available), or DeepFM / DCN without any. `churn` renames the
// training file's keys (the test file keeps every value's own key).
v1::JobSpec CtrJob(const std::string& dir, v1::Mode mode, int epochs, double* bayes_auc,
                   v1::ModelSpec::Kind kind = v1::ModelSpec::WDL, int64_t train_rows = 20000,
                   const datagen::CtrKeyChurn& churn = {}) {
  std::filesystem::create_directories(dir);
  const datagen::CtrTeacherConfig teacher;
  absl::StatusOr<datagen::CtrGenerationReport> train =
      datagen::GenerateCtr(teacher, 1, train_rows, dir + "/train.tsv.gz", churn);
  absl::StatusOr<datagen::CtrGenerationReport> test =
      datagen::GenerateCtr(teacher, 2, 5000, dir + "/test.tsv");  // plain text: both formats read
  EXPECT_TRUE(train.ok() && test.ok());
  *bayes_auc = test.ok() ? test->bayes_auc : 0;
  v1::JobSpec job;
  job.set_job_id("ctr-integration");
  job.mutable_model()->set_kind(kind);
  job.mutable_model()->set_embedding_dim(8);
  job.mutable_model()->add_hidden(16);
  if (kind == v1::ModelSpec::DCN) job.mutable_model()->set_cross_layers(1);
  for (auto [a, b] : {std::pair{23, 20}, {1, 13}, {5, 6}, {24, 21}}) {
    if (kind != v1::ModelSpec::WDL) break;
    v1::FieldCross* cross = job.mutable_model()->add_wide_crosses();
    cross->set_first(a);
    cross->set_second(b);
  }
  job.mutable_dataset()->set_kind(v1::DatasetSpec::CRITEO);
  job.mutable_dataset()->set_train_path(dir + "/train.tsv.gz");
  job.mutable_dataset()->set_test_path(dir + "/test.tsv");
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::ADAGRAD);
  // The CTR examples' rates: 0.3 for wide & deep, 0.1 where embeddings multiply (ADR 0009).
  job.mutable_optimizer()->set_learning_rate(kind == v1::ModelSpec::WDL ? 0.3f : 0.1f);
  job.set_global_batch(128);
  job.set_num_workers(2);
  job.set_num_shards(2);
  job.set_mode(mode);
  job.mutable_stop()->set_epochs(epochs);
  job.set_block_size(1000);
  job.mutable_eval()->set_interval_seconds(1);
  job.set_checkpoint_interval_seconds(1);
  job.set_seed(1);
  return job;
}

// Scenario: gba training of wide & deep learns well above chance (AUC 0.5); every pushed row
// was accepted (routing to owners agrees with the shards' ownership checks). With a validation
// set, every evaluation scores it too, and the status keeps the one that scored best there.
TEST(CtrTraining, WideAndDeepLearnsInGba) {
  double bayes = 0;
  const std::string dir = TestRunDir("ctr-data");
  v1::JobSpec job = CtrJob(dir, v1::MODE_GBA, 3, &bayes);
  ASSERT_TRUE(
      datagen::GenerateCtr(datagen::CtrTeacherConfig(), 3, 2000, dir + "/validation.tsv").ok());
  job.mutable_dataset()->set_validation_path(dir + "/validation.tsv");
  auto cluster = launch::LocalCluster::Start(Options(job, "ctr-gba"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = WaitFor(**cluster, Done, absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->last_eval().final());
  // Measured 0.78 here (Bayes ~0.80, chance 0.5); the bound leaves room for gba noise.
  EXPECT_GT(status->last_eval().auc(), 0.74) << "Bayes AUC " << bayes;
  EXPECT_LT(status->last_eval().auc(), bayes + 0.01);
  EXPECT_GE(status->examples(), 60000);
  double best_validation = 0;
  for (const v1::EvalStatus& eval : status->eval_history()) {
    EXPECT_EQ(eval.validation().examples(), 2000) << eval.ShortDebugString();
    EXPECT_GT(eval.validation().auc_standard_error(), 0) << eval.ShortDebugString();
    best_validation = std::max(best_validation, eval.validation().auc());
  }
  ASSERT_TRUE(status->has_kept_eval());
  EXPECT_DOUBLE_EQ(status->kept_eval().validation().auc(), best_validation);
  EXPECT_GT(status->kept_eval().auc(), 0.74) << "the kept version's test AUC";
  EXPECT_EQ(status->early_stop_reason(), "") << "early_stop is off";
  // Each shard wrote the newest point that was the best on validation when it was read: the
  // kept version when that is a point (parameters only; the final parameters are the shards'
  // last checkpoint).
  for (int shard = 0; shard < job.num_shards(); ++shard) {
    absl::StatusOr<v1::ShardCheckpoint> kept =
        checkpoint::CheckpointStore((*cluster)->run_dir() + "/checkpoints/kept")
            .LoadLatest(shard, job.num_shards());
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(kept->optimizer(), shard::ShardCore::kKeptOptimizer);
    if (!status->kept_eval().final()) {
      ASSERT_EQ(status->kept_eval().shard_versions_size(), job.num_shards());
      EXPECT_EQ(kept->version(), status->kept_eval().shard_versions(shard));
    }
  }
  for (const v1::ShardStatus& shard : status->shards()) {
    EXPECT_EQ(shard.mode(), v1::MODE_GBA);
    EXPECT_EQ(shard.gradients().rejected(), 0);
    EXPECT_GT(shard.version(), 60000 / 128 / 2);
  }
  for (const launch::Exit& exit : (*cluster)->StopAfterJob()) {
    EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) << exit.Describe();
  }
}

// Scenario: a shard holding embedding rows is SIGKILLed in sync mode and restarted; it restores
// its rows and optimizer state from its latest checkpoint and the run completes and learns.
// 6 epochs (~940 versions), paced to >= 9.4 s on any machine (testing::kPacedStep), so the kill
// lands mid-run however fast the machine: unpaced, the vectorised kernels finished them in ~2 s.
TEST(CtrTraining, KilledShardRestoresItsEmbeddingRows) {
  double bayes = 0;
  const v1::JobSpec job = CtrJob(TestRunDir("ctr-data-kill"), v1::MODE_SYNC, 6, &bayes);
  auto cluster = launch::LocalCluster::Start(testing::PacedOptions(job, "ctr-shard-death"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.shards(0).version() > 200; },
      absl::Seconds(90));
  ASSERT_TRUE(running.ok()) << running.status();
  // The event the kill needs: a checkpoint of these versions exists.
  ASSERT_TRUE(testing::Eventually(
      [&] { return testing::NewestCheckpointVersion(**cluster, 0) > 150; }, absl::Seconds(30)));
  ASSERT_EQ((*cluster)->Status()->state(), v1::JOB_RUNNING);
  absl::Status restarted = (*cluster)->KillAndRestart(launch::LocalCluster::ShardName(0));
  ASSERT_TRUE(restarted.ok()) << restarted;
  auto done = WaitFor(**cluster, Done, absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().auc(), 0.74);  // measured 0.78
  const std::string log = testing::ReadFile((*cluster)->run_dir() + "/logs/shard-0.log");
  EXPECT_NE(log.find("restored version"), std::string::npos)
      << log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
}

// One sample of a shard's embedding memory during a run: the examples trained so far, and the
// shard's rows and table bytes as its /metrics endpoint reports them.
struct MemorySample {
  int64_t examples;
  double rows;
  double bytes;
};

// Trains `job` to the end, sampling shard 0's embedding memory every 100 ms; returns the final
// status.
absl::StatusOr<v1::ClusterStatus> TrainSamplingMemory(const v1::JobSpec& job,
                                                      const std::string& name,
                                                      std::vector<MemorySample>* samples) {
  auto cluster = launch::LocalCluster::Start(Options(job, name));
  if (!cluster.ok()) return cluster.status();
  const int port = (*cluster)->metrics_ports().at(launch::LocalCluster::ShardName(0));
  const absl::Time deadline = absl::Now() + absl::Seconds(100);
  while (absl::Now() < deadline) {
    absl::StatusOr<v1::ClusterStatus> status = (*cluster)->Status();
    if (status.ok() && Done(*status)) return status;
    const std::string metrics = testing::ScrapeMetrics(port);
    const double rows =
        testing::MetricValue(metrics, "syncopate_shard_embedding_rows{shard=\"0\"}");
    double bytes = 0;
    for (const char* table : {"deep", "wide"}) {
      bytes += testing::MetricValue(
          metrics,
          absl::StrCat("syncopate_shard_embedding_table_bytes{shard=\"0\",table=\"", table, "\"}"));
    }
    if (status.ok() && rows >= 0) samples->push_back({status->examples(), rows, bytes});
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(name, " did not finish in 100 s"));
}

// The largest sample of `field` among samples with examples in [from, to).
double MaxBetween(const std::vector<MemorySample>& samples, int64_t from, int64_t to,
                  double MemorySample::*field) {
  double most = 0;
  for (const MemorySample& s : samples) {
    if (s.examples >= from && s.examples < to) most = std::max(most, s.*field);
  }
  return most;
}

// Scenario: one pass over a stream whose key space grows without bound (half of each column's
// values take new keys every 1000 rows, like new ids in a live click log): with admission after
// 2 sightings and eviction after 40 idle updates, shard 0's embedding rows and bytes stop growing
// once warmed up, while the same job keeping every row grows with the stream; the test AUC
// holds (within 0.01 of keeping everything).
TEST(CtrTraining, EmbeddingMemoryStaysFlatOnAnEndlessStream) {
  constexpr int64_t kRows = 60000;
  double bayes = 0;
  v1::JobSpec keep = CtrJob(TestRunDir("ctr-stream-data"), v1::MODE_GBA, 1, &bayes,
                            v1::ModelSpec::WDL, kRows, {.period_rows = 1000, .fraction = 0.5});
  keep.set_job_id("ctr-stream");
  v1::JobSpec bounded = keep;
  bounded.mutable_model()->set_admit_after_count(2);
  bounded.mutable_model()->set_evict_after_updates(40);

  std::vector<MemorySample> kept, flat;
  absl::StatusOr<v1::ClusterStatus> keep_done = TrainSamplingMemory(keep, "ctr-keep", &kept);
  ASSERT_TRUE(keep_done.ok()) << keep_done.status();
  absl::StatusOr<v1::ClusterStatus> flat_done = TrainSamplingMemory(bounded, "ctr-bounded", &flat);
  ASSERT_TRUE(flat_done.ok()) << flat_done.status();

  // The measurement behind the ADR's table (docs/decisions/0010-bounded-embedding-memory.md).
  for (const auto& [name, samples] : {std::pair{"keep", &kept}, {"bounded", &flat}}) {
    for (int64_t at = kRows / 6; at <= kRows; at += kRows / 6) {
      std::cout << name << ": examples < " << at << ": rows "
                << MaxBetween(*samples, at - kRows / 6, at, &MemorySample::rows) << ", bytes "
                << MaxBetween(*samples, at - kRows / 6, at, &MemorySample::bytes) << "\n";
    }
  }
  const double keep_auc = keep_done->last_eval().auc();
  const double flat_auc = flat_done->last_eval().auc();
  std::cout << "test AUC: keep " << keep_auc << ", bounded " << flat_auc << ", Bayes " << bayes
            << "\n";

  // Warm-up is the first third (~150 updates, several eviction horizons); after it the bounded
  // shard's bytes and rows stay within 10% of the second third's, while keeping everything
  // grows by more than a third over the same stretch.
  const int64_t third = kRows / 3;
  const double flat_rows = MaxBetween(flat, third, 2 * third, &MemorySample::rows);
  const double flat_bytes = MaxBetween(flat, third, 2 * third, &MemorySample::bytes);
  ASSERT_GT(flat_rows, 0) << "no samples in the second third";
  EXPECT_LE(MaxBetween(flat, 2 * third, kRows + 1, &MemorySample::rows), 1.1 * flat_rows);
  EXPECT_LE(MaxBetween(flat, 2 * third, kRows + 1, &MemorySample::bytes), 1.1 * flat_bytes);
  EXPECT_GT(MaxBetween(kept, 2 * third, kRows + 1, &MemorySample::rows),
            1.33 * MaxBetween(kept, third, 2 * third, &MemorySample::rows));
  EXPECT_GT(flat_auc, 0.70);
  EXPECT_GT(flat_auc, keep_auc - 0.01);
}

// How the test confines a worker's memory the way a container limit would: its own memory
// cgroup (v1 here; the kernel kills it past the limit, there is no swap to spill to) where the
// hierarchy is writable, else RLIMIT_DATA (allocations past the limit fail). Each worker and the
// evaluator get their own limit, not a shared one.
struct MemoryLimit {
  std::vector<std::string> prefix;  // LocalClusterOptions::worker_command_prefix
  std::string cgroup;               // the parent group to remove afterwards ("" for rlimit)
  std::string how;
};

MemoryLimit LimitMemory(int64_t bytes, const std::string& name) {
  const std::filesystem::path v1_root = "/sys/fs/cgroup/memory";
  const std::filesystem::path group = v1_root / absl::StrCat("syncopate-", name, "-", getpid());
  std::error_code error;
  if (std::filesystem::exists(v1_root / "memory.limit_in_bytes") &&
      std::filesystem::create_directory(group, error)) {
    // Each process makes a child group of its own ($$), sets the limit and enters it, then
    // becomes the worker.
    const std::string script = absl::StrCat(
        "d=", group.string(), "/$$ && mkdir \"$d\" && echo ", bytes,
        " > \"$d/memory.limit_in_bytes\" && echo $$ > \"$d/cgroup.procs\" && exec \"$@\"");
    return {{"/bin/sh", "-c", script, "sh"},
            group.string(),
            absl::StrCat("memory cgroup v1, ", bytes >> 20, " MiB per process")};
  }
  return {{"/usr/bin/prlimit", absl::StrCat("--data=", bytes), "--"},
          "",
          absl::StrCat("RLIMIT_DATA, ", bytes >> 20, " MiB per process")};
}

void RemoveCgroup(const std::string& group) {
  if (group.empty()) return;
  std::error_code error;
  for (const auto& child : std::filesystem::directory_iterator(group, error)) {
    if (child.is_directory()) rmdir(child.path().c_str());
  }
  rmdir(group.c_str());
}

// Scenario (issue 13, datasets larger than memory): DeepFM trains one epoch over 1.08M rows in
// four gzip files named by a glob, with each worker and the evaluator confined to 64 MiB; parsed
// into memory the way workers used to load it, the training set alone is 285 MB (264 bytes a
// row), over four times the limit. Workers read only the blocks they lease (data::CriteoFiles), so
// the job completes, learns, and no process is killed. The limit is shown to bite: under it a
// process that fills a buffer of twice the limit fails. (Measured, one run each: unconfined a
// worker peaks at ~29 MB VmHWM and the evaluator at ~44 MB; at a 20 MiB limit the workers finish
// within it but the evaluator is killed and the test fails.)
TEST(CtrTraining, TrainsOnADatasetLargerThanAWorkersMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow and quarantine do not fit a 64 MiB limit";
#endif
  constexpr int64_t kLimit = int64_t{64} << 20;
  constexpr int kFiles = 4;
  constexpr int64_t kRowsPerFile = 270000;
  const std::string dir = TestRunDir("ctr-large-data");
  std::filesystem::create_directories(dir);
  const datagen::CtrTeacherConfig teacher;
  for (int f = 0; f < kFiles; ++f) {
    ASSERT_TRUE(datagen::GenerateCtr(teacher, 10 + f, kRowsPerFile,
                                     absl::StrCat(dir, "/day_", f, ".tsv.gz"))
                    .ok());
  }
  absl::StatusOr<datagen::CtrGenerationReport> test =
      datagen::GenerateCtr(teacher, 2, 20000, dir + "/test.tsv.gz");
  ASSERT_TRUE(test.ok()) << test.status();
  const int64_t in_memory = kFiles * kRowsPerFile *
                            static_cast<int64_t>(sizeof(float) * (1 + data::kCriteoNumeric) +
                                                 sizeof(uint64_t) * data::kCriteoCategorical);
  ASSERT_GE(in_memory, 4 * kLimit);

  const MemoryLimit limit = LimitMemory(kLimit, "large");
  std::cout << "limit: " << limit.how << "; the training set in memory: " << (in_memory >> 20)
            << " MiB\n";
  {
    // The limit bites: dd's buffer is allocated and filled (reading /dev/zero) before any write.
    std::vector<std::string> argv = limit.prefix;
    for (const char* arg : {"/bin/dd", "if=/dev/zero", "of=/dev/null", "count=1"}) {
      argv.emplace_back(arg);
    }
    argv.push_back(absl::StrCat("bs=", 2 * kLimit));
    std::string command;
    for (const std::string& arg : argv) absl::StrAppend(&command, "'", arg, "' ");
    EXPECT_NE(std::system((command + "2>/dev/null").c_str()), 0) << command;
  }

  v1::JobSpec job;
  job.set_job_id("ctr-larger-than-memory");
  job.mutable_model()->set_kind(v1::ModelSpec::DEEPFM);
  job.mutable_model()->set_embedding_dim(8);
  job.mutable_model()->add_hidden(16);
  job.mutable_dataset()->set_kind(v1::DatasetSpec::CRITEO);
  job.mutable_dataset()->set_train_path(dir + "/day_*.tsv.gz");
  job.mutable_dataset()->set_test_path(dir + "/test.tsv.gz");
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::ADAGRAD);
  job.mutable_optimizer()->set_learning_rate(0.1f);
  job.set_global_batch(256);
  job.set_num_workers(2);
  job.set_num_shards(1);
  job.set_mode(v1::MODE_GBA);
  job.mutable_stop()->set_epochs(1);
  job.set_block_size(2048);
  job.mutable_eval()->set_interval_seconds(60);  // the final evaluation only
  job.set_seed(1);
  launch::LocalClusterOptions options = Options(job, "ctr-large");
  options.worker_command_prefix = limit.prefix;
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = WaitFor(**cluster, Done, absl::Seconds(200));
  std::vector<launch::Exit> exits = (*cluster)->StopAfterJob();
  RemoveCgroup(limit.cgroup);
  std::filesystem::remove_all(dir);  // ~100 MB of gzip
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->last_eval().final());
  EXPECT_GE(status->examples(), kFiles * kRowsPerFile);
  // Measured 0.777 on this job (Bayes ~0.80).
  EXPECT_GT(status->last_eval().auc(), 0.74) << "Bayes AUC " << test->bayes_auc;
  for (const launch::Exit& exit : exits) {
    EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) << exit.Describe();
  }
}

}  // namespace
}  // namespace syncopate
