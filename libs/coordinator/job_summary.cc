#include "libs/coordinator/job_summary.h"

#include "absl/strings/str_format.h"

namespace syncopate::coordinator {

std::string JobSummary(const v1::ClusterStatus& status) {
  int workers = 0;
  for (const v1::WorkerStatus& worker : status.workers()) {
    if (worker.role() == v1::ROLE_WORKER) ++workers;
  }
  std::string summary =
      absl::StrFormat("job %s %s after %.1f s: %d examples (%.2f epochs), %d workers, %d shards; ",
                      status.job_id(), v1::JobState_Name(status.state()), status.elapsed_seconds(),
                      status.examples(), status.epoch(), workers, status.shards_size());
  if (!status.has_last_eval()) return summary + "no evaluation";
  const v1::EvalStatus& eval = status.last_eval();
  absl::StrAppendFormat(&summary, "%s evaluation: accuracy %.2f%%, ",
                        eval.final() ? "final" : "last", 100.0 * eval.accuracy());
  if (eval.auc() > 0) absl::StrAppendFormat(&summary, "AUC %.4f, ", eval.auc());
  absl::StrAppendFormat(&summary, "loss %.4f", eval.loss());
  return summary;
}

}  // namespace syncopate::coordinator
