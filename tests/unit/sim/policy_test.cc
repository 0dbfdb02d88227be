#include "libs/sim/policy.h"

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "libs/common/mode_rules.h"
#include "libs/job/job_spec.h"

namespace syncopate::sim {
namespace {

using ::google::protobuf::util::MessageDifferencer;

// The default job (Nesterov 0.05/0.9, warmup then cosine) at N = 16, G = 1,024.
v1::JobSpec Job() {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.set_num_workers(16);
  job.set_global_batch(1024);
  return job;
}

TEST(JobForPolicy, AModeChangesOnlyTheMode) {
  for (const ModeRules& row : kModeRules) {  // sync, gba, async, auto
    absl::StatusOr<v1::JobSpec> job = JobForPolicy(Job(), row.name);
    ASSERT_TRUE(job.ok()) << row.name << ": " << job.status();
    v1::JobSpec expected = Job();
    expected.set_mode(row.mode);
    EXPECT_TRUE(MessageDifferencer::Equals(*job, expected)) << row.name;
  }
}

TEST(JobForPolicy, AsyncScaledIsAsyncAtTheLinearlyScaledRateWithTheSameMomentum) {
  absl::StatusOr<v1::JobSpec> job = JobForPolicy(Job(), kAsyncScaled);
  ASSERT_TRUE(job.ok()) << job.status();
  // b/G = (1,024 / 16) / 1,024 = 1/16: 0.05 / 16 = 0.003125.
  EXPECT_FLOAT_EQ(job->optimizer().learning_rate(), 0.003125f);
  EXPECT_FLOAT_EQ(FairAsyncLearningRate(Job()), 0.003125f);
  // Everything else is the job's own: mode aside, the same spec with the rate put back.
  v1::JobSpec restored = *job;
  restored.set_mode(v1::MODE_SYNC);
  restored.mutable_optimizer()->set_learning_rate(0.05f);
  EXPECT_TRUE(MessageDifferencer::Equals(restored, Job()));
  EXPECT_EQ(job->mode(), v1::MODE_ASYNC);
  EXPECT_FLOAT_EQ(job->optimizer().momentum(), 0.9f);
  EXPECT_TRUE(job->optimizer().nesterov());
}

TEST(JobForPolicy, AsyncScaledStepPerSampleEqualsSync) {
  // Under a steady gradient a momentum update moves lr / (1 - mu) g: sync one update per G
  // samples, async-scaled N updates of lr / N each. Equal at every N, with G not a multiple of N.
  for (int n : {1, 3, 16, 1000}) {
    v1::JobSpec job = Job();
    job.set_num_workers(n);
    job.set_global_batch(4096);
    const double per_global_batch =
        n * static_cast<double>((*JobForPolicy(job, kAsyncScaled)).optimizer().learning_rate());
    EXPECT_NEAR(per_global_batch, 0.05, 1e-8) << n;
  }
}

TEST(JobForPolicy, RefusesUnknownNamesAndAsyncScaledWithoutWorkers) {
  absl::StatusOr<v1::JobSpec> unknown = JobForPolicy(Job(), "hogwild");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(),
            "unknown policy 'hogwild' (expected sync, gba, async, auto or async-scaled)");
  v1::JobSpec no_workers = Job();
  no_workers.set_num_workers(0);
  EXPECT_EQ(JobForPolicy(no_workers, kAsyncScaled).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::sim
