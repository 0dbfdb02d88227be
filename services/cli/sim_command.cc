// `syncopate sim`: the job simulated in virtual time (libs/sim, docs/simulation.md). Wiring only:
// flags to SimOptions, the result to stdout.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "libs/common/mode_rules.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/report/run_report.h"
#include "libs/runtime/process_runtime.h"
#include "libs/sim/policy.h"
#include "libs/sim/simulation.h"
#include "services/cli/commands.h"

namespace syncopate::cli {

int RunSim() {
  absl::StatusOr<v1::JobSpec> job = JobFromFlags();
  if (!job.ok()) runtime::Die(absl::StrCat("sim: ", job.status().message()));
  std::string policy = absl::GetFlag(FLAGS_policy);
  if (!policy.empty()) {
    job = sim::JobForPolicy(*job, policy);
    if (!job.ok()) runtime::Die(absl::StrCat("sim: --policy: ", job.status().message()));
  } else {
    policy = ModeName(job->mode());
  }
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  job->set_seed(seed);
  const std::string spec_path = absl::GetFlag(FLAGS_sim);
  if (spec_path.empty()) runtime::Die("sim: --sim=SPEC is required (see examples/sim/)");
  absl::StatusOr<v1::SimSpec> spec = sim::LoadSimSpecFile(spec_path);
  if (!spec.ok()) runtime::Die(absl::StrCat("sim: ", spec.status().message()));

  sim::SimOptions options;
  options.job = *job;
  options.spec = *spec;
  options.timing_seed = seed;
  // Time to target in the job's own quality metric: AUC for the CTR models, else accuracy.
  const std::string metric = std::string(job::QualityMetric(*job));
  const bool auc = metric == "auc";
  options.target_quality =
      auc ? absl::GetFlag(FLAGS_target_auc) : absl::GetFlag(FLAGS_target_accuracy);
  // The simulated coordinator's INFO lines (a hello per worker, every membership change) are
  // its log, not the simulation's output; warnings still show.
  FLAGS_minloglevel = google::GLOG_WARNING;
  const absl::Time start = absl::Now();
  options.stop_requested = [] { return runtime::ShutdownRequested(); };
  absl::StatusOr<sim::SimResult> result = sim::RunSimulation(options);
  if (absl::IsCancelled(result.status())) {
    runtime::Die(absl::StrCat("sim: interrupted: ", result.status().message()), 130);
  }
  if (!result.ok()) runtime::Die(absl::StrCat("sim: ", result.status().message()), 1);
  const double real_seconds = absl::ToDoubleSeconds(absl::Now() - start);

  for (const sim::SimEvaluation& e : result->evaluations) {
    if (auc) {
      printf("eval  %8.2f s  %9ld examples  auc %.4f  accuracy %.4f  loss %.4f\n", e.seconds,
             static_cast<long>(e.examples), e.auc, e.accuracy, e.loss);
    } else {
      printf("eval  %8.2f s  %9ld examples  accuracy %.4f  loss %.4f\n", e.seconds,
             static_cast<long>(e.examples), e.accuracy, e.loss);
    }
  }
  for (const sim::SimSwitch& s : result->switches) {
    printf("switch %7.2f s  shard %d -> %s (%s)\n", s.seconds, s.shard, ModeName(s.mode).c_str(),
           s.reason.c_str());
  }
  const sim::SimEvaluation& last = result->final_evaluation();
  const std::string to_target = result->seconds_to_target.has_value()
                                    ? absl::StrCat(*result->seconds_to_target, " s")
                                    : std::string("not reached");
  printf(
      "syncopate sim: %s, %d workers, %d shards, seed %lu: virtual wall time %.2f s, %ld "
      "examples, final %s %.4f, time to %.*f: %s, %zu switches, %zu deaths, %zu joins, pushes "
      "%ld applied / %ld decayed / %ld dropped / %ld rejected, mean staleness %.2f; %ld events "
      "in %.1f s real\n",
      policy.c_str(), job->num_workers(), job->num_shards(), static_cast<unsigned long>(seed),
      result->wall_seconds, static_cast<long>(result->examples), metric.c_str(), last.quality,
      auc ? 4 : 2, options.target_quality, to_target.c_str(), result->switches.size(),
      result->dead_workers.size(), result->joins.size(),
      static_cast<long>(result->gradients.applied()),
      static_cast<long>(result->gradients.decayed()),
      static_cast<long>(result->gradients.dropped()),
      static_cast<long>(result->gradients.rejected()), report::MeanStaleness(result->gradients),
      static_cast<long>(result->events), real_seconds);
  return 0;
}

}  // namespace syncopate::cli
