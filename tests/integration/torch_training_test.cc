// Real processes on loopback training a user's PyTorch module (model kind TORCH): the same
// coordinator, shards and worker runtime as the built-in models, with the module hosted in the
// workers and the evaluator.
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

// examples/torch/mlp.textproto made small: a 6k-example subset, 2k test images, G = 64.
v1::JobSpec TorchMlpJob(v1::Mode mode, int workers, int epochs, const std::string& module) {
  absl::StatusOr<v1::JobSpec> job =
      job::LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/torch/mlp.textproto");
  EXPECT_TRUE(job.ok()) << job.status();
  job->set_job_id("torch-integration");
  job->mutable_model()->mutable_torch()->set_module(module);
  job->mutable_dataset()->set_train_limit(6000);
  job->mutable_dataset()->set_test_limit(2000);
  job->set_num_workers(workers);
  job->set_num_shards(2);
  job->set_global_batch(64);
  job->set_mode(mode);
  job->mutable_stop()->set_epochs(epochs);
  job->mutable_eval()->set_interval_seconds(1);
  return *job;
}

std::string ExampleModule() { return std::string(SYNCOPATE_SOURCE_DIR) + "/examples/torch/mlp.py"; }

class TorchModes : public ::testing::TestWithParam<v1::Mode> {};

// Scenario: the PyTorch MLP of examples/torch/mlp.py learns through the cluster in sync and in
// gba (accuracy well above chance, 0.1), every update consumed one global batch in sync, nothing
// was rejected, and every process exits 0.
TEST_P(TorchModes, TheExampleMlpLearns) {
  auto cluster = launch::LocalCluster::Start(
      testing::Options(TorchMlpJob(GetParam(), 2, 2, ExampleModule()),
                       absl::StrCat("torch-", v1::Mode_Name(GetParam()))));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto done = WaitFor(**cluster, Done, absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->last_eval().final());
  EXPECT_GT(done->last_eval().accuracy(), 0.75);
  EXPECT_GE(done->examples(), 12000);
  for (const v1::ShardStatus& shard : done->shards()) {
    EXPECT_EQ(shard.gradients().rejected(), 0);
    if (GetParam() == v1::MODE_SYNC) {
      EXPECT_NEAR(static_cast<double>(shard.version()), shard.gradients().applied() / 2.0, 1.0);
    }
  }
  for (const launch::Exit& exit : (*cluster)->StopAfterJob()) {
    EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) << exit.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TorchModes, ::testing::Values(v1::MODE_SYNC, v1::MODE_GBA),
                         [](const auto& info) { return v1::Mode_Name(info.param); });

// Scenario: the module's Python code raises in one worker's step (a data error, once): that
// worker exits 1 with the traceback's last line, its leases are re-issued, and the job completes
// with the other worker.
TEST(TorchFaults, AWorkerWhoseCodeRaisesExitsWithOneLineAndTheJobGoesOn) {
  const std::string dir = testing::TestRunDir("torch-raises-module");
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/raised");
  std::filesystem::copy_file(
      std::string(SYNCOPATE_SOURCE_DIR) + "/tests/integration/testdata/raises_once.py",
      dir + "/model.py", std::filesystem::copy_options::overwrite_existing);
  auto cluster = launch::LocalCluster::Start(
      testing::Options(TorchMlpJob(v1::MODE_SYNC, 2, 2, dir + "/model.py"), "torch-raises"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto done = WaitFor(**cluster, Done, absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().accuracy(), 0.7);
  EXPECT_GE(done->examples(), 12000);
  // The coordinator's status names the failure with the worker's own reason.
  int reported = 0;
  for (const v1::WorkerStatus& worker : done->workers()) {
    if (worker.failure().empty()) continue;
    ++reported;
    EXPECT_THAT(worker.failure(),
                ::testing::HasSubstr("RuntimeError: simulated data error in this worker"));
  }
  EXPECT_EQ(reported, 1);
  int failed = 0;
  for (const launch::Exit& exit : (*cluster)->StopAfterJob()) {
    if (!WIFEXITED(exit.status) || WEXITSTATUS(exit.status) == 0) continue;
    ++failed;
    EXPECT_EQ(WEXITSTATUS(exit.status), 1) << exit.Describe();
    const std::string log =
        testing::ReadFile((*cluster)->run_dir() + "/logs/" + exit.name + ".log");
    EXPECT_THAT(log, ::testing::HasSubstr("RuntimeError: simulated data error in this worker"));
    EXPECT_THAT(log, ::testing::HasSubstr("Traceback (most recent call last)"));
  }
  EXPECT_EQ(failed, 1);
}

// Scenario: a worker whose model file no longer matches the job's (the file changed after the
// coordinator described it) is refused with one line naming the difference, and exits 1.
TEST(TorchFaults, AWorkerWithAnotherModelIsRefused) {
  const std::string dir = testing::TestRunDir("torch-mismatch-module");
  std::filesystem::create_directories(dir);
  const std::string module = dir + "/model.py";
  std::filesystem::copy_file(ExampleModule(), module,
                             std::filesystem::copy_options::overwrite_existing);
  v1::JobSpec job = TorchMlpJob(v1::MODE_SYNC, 1, 200, module);
  launch::LocalClusterOptions options = testing::Options(job, "torch-mismatch");
  options.evaluator = false;
  options.worker_processes = 0;
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // The coordinator has described the module (it is serving); now the file changes.
  std::string text = testing::ReadFile(module);
  const std::string from = "for hidden in (256, 128):";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "for hidden in (200, 128):");
  std::ofstream(module) << text;

  const std::string bin = std::string(SYNCOPATE_BIN_DIR) + "/syncopate-worker";
  const std::string out = (*cluster)->run_dir() + "/logs/stranger.err";
  const std::string command =
      absl::StrCat("timeout 120 ", bin, " --coordinator=", (*cluster)->coordinator_address(),
                   " --name=stranger --metrics_listen=127.0.0.1:0 2>", out);
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(testing::ReadFile(out),
              ::testing::HasSubstr("does not match the job's model: parameter 0 is 0.weight "
                                   "[200, 784] here and 0.weight [256, 784] in the job"));
}

}  // namespace
}  // namespace syncopate
