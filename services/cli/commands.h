// The commands of the `syncopate` CLI, one file each; their flags are defined in
// syncopate_main.cc (where --help finds them) and declared here.
// Thread-safety: each command runs once, on the main thread, after the flags are parsed.
#ifndef SYNCOPATE_SERVICES_CLI_COMMANDS_H_
#define SYNCOPATE_SERVICES_CLI_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "syncopate/v1/job.pb.h"

ABSL_DECLARE_FLAG(std::string, job);
ABSL_DECLARE_FLAG(std::string, isa);
ABSL_DECLARE_FLAG(int, workers);
ABSL_DECLARE_FLAG(int, shards);
ABSL_DECLARE_FLAG(int, epochs);
ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(int, global_batch);
ABSL_DECLARE_FLAG(std::string, slowdowns);
ABSL_DECLARE_FLAG(std::string, slowdown_schedule);
ABSL_DECLARE_FLAG(int64_t, train_limit);
ABSL_DECLARE_FLAG(int64_t, test_limit);
ABSL_DECLARE_FLAG(bool, evaluator);
ABSL_DECLARE_FLAG(bool, shared_memory);
ABSL_DECLARE_FLAG(int, logical_workers);
ABSL_DECLARE_FLAG(std::string, run_dir);
ABSL_DECLARE_FLAG(std::string, resume);
ABSL_DECLARE_FLAG(std::string, bin_dir);
ABSL_DECLARE_FLAG(int, timeout_seconds);
ABSL_DECLARE_FLAG(bool, prometheus);
ABSL_DECLARE_FLAG(bool, insecure_no_join_token);
ABSL_DECLARE_FLAG(std::string, coordinator);
ABSL_DECLARE_FLAG(std::string, address);
ABSL_DECLARE_FLAG(int, health_timeout_seconds);
ABSL_DECLARE_FLAG(int64_t, rows);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(uint64_t, teacher_seed);
ABSL_DECLARE_FLAG(int64_t, churn_period_rows);
ABSL_DECLARE_FLAG(double, churn_fraction);
ABSL_DECLARE_FLAG(std::string, sim);
ABSL_DECLARE_FLAG(std::string, policy);
ABSL_DECLARE_FLAG(double, target_accuracy);
ABSL_DECLARE_FLAG(double, target_auc);
ABSL_DECLARE_FLAG(std::string, teacher);
ABSL_DECLARE_FLAG(std::string, from);
ABSL_DECLARE_FLAG(std::string, module);
ABSL_DECLARE_FLAG(bool, torch_formats);
ABSL_DECLARE_FLAG(std::string, into);
ABSL_DECLARE_FLAG(int, keep);

namespace syncopate::cli {

// Each returns the process's exit code; bad input ends the process with one line (exit 2).
int RunLocal();                                  // local_command.cc
int RunStatus();                                 // status_command.cc
int RunRelease();                                // release_command.cc
int RunHealth();                                 // health_command.cc
int RunDatagen(const std::vector<char*>& args);  // datagen_command.cc
int RunSim();                                    // sim_command.cc
int RunExport();                                 // export_command.cc

// The --job file (or the built-in default job) with --workers, --shards, --epochs,
// --global_batch, --train_limit, --test_limit and --mode applied, validated (job_flags.cc).
absl::StatusOr<v1::JobSpec> JobFromFlags();

}  // namespace syncopate::cli

#endif  // SYNCOPATE_SERVICES_CLI_COMMANDS_H_
