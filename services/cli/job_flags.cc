// The job a command runs: the --job file (or the built-in default job) with the command line's
// overrides applied, validated (`syncopate local` and `syncopate sim` read the same flags).
#include <string>

#include "absl/flags/flag.h"
#include "libs/common/mode_rules.h"
#include "libs/job/job_spec.h"
#include "services/cli/commands.h"

namespace syncopate::cli {

absl::StatusOr<v1::JobSpec> JobFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_job);
  absl::StatusOr<v1::JobSpec> job =
      path.empty() ? job::ParseJobSpec(job::DefaultJobText()) : job::LoadJobSpecFile(path);
  if (!job.ok()) return job.status();
  if (absl::GetFlag(FLAGS_workers) > 0) job->set_num_workers(absl::GetFlag(FLAGS_workers));
  if (absl::GetFlag(FLAGS_shards) > 0) job->set_num_shards(absl::GetFlag(FLAGS_shards));
  if (absl::GetFlag(FLAGS_epochs) > 0) job->mutable_stop()->set_epochs(absl::GetFlag(FLAGS_epochs));
  if (absl::GetFlag(FLAGS_global_batch) > 0) {
    job->set_global_batch(absl::GetFlag(FLAGS_global_batch));
  }
  if (absl::GetFlag(FLAGS_train_limit) >= 0) {
    job->mutable_dataset()->set_train_limit(absl::GetFlag(FLAGS_train_limit));
  }
  if (absl::GetFlag(FLAGS_test_limit) >= 0) {
    job->mutable_dataset()->set_test_limit(absl::GetFlag(FLAGS_test_limit));
  }
  if (!absl::GetFlag(FLAGS_mode).empty()) {
    absl::StatusOr<v1::Mode> mode = ParseMode(absl::GetFlag(FLAGS_mode));
    if (!mode.ok()) return mode.status();
    job->set_mode(*mode);
  }
  absl::Status valid = job::ValidateJobSpec(*job);
  if (!valid.ok()) return valid;
  return job;
}

}  // namespace syncopate::cli
