// How a cluster's status reads to a person: the progress line `syncopate local` prints every
// 2 s and the tables `syncopate status` prints.
// Thread-safety: pure functions; thread-safe.
#ifndef SYNCOPATE_LIBS_REPORT_STATUS_VIEW_H_
#define SYNCOPATE_LIBS_REPORT_STATUS_VIEW_H_

#include <string>

#include "syncopate/v1/cluster.pb.h"

namespace syncopate::report {

// "[  12.3s] epoch 1.50  examples 90000  7400 ex/s  shards: v351 sync, v351 sync  test acc
// 84.10% auc 0.9850" ("-" before the first evaluation).
std::string ProgressLine(const v1::ClusterStatus& status);

// The job line, the worker and shard tables, each shard's last mode decision, the last
// evaluation and the kept version; ends with a newline.
std::string StatusText(const v1::ClusterStatus& status);

// The version a job kept (ClusterStatus.kept_eval), as `syncopate local`, `syncopate status` and
// report.md show it: "test accuracy 77.87%, AUC 0.7671, loss 0.4744 of point 8 at 380928
// examples (validation AUC 0.7705, accuracy 77.75%)" ("of the final parameters" when the final
// evaluation is the kept one).
std::string KeptVersionSummary(const v1::EvalStatus& kept);

// A published export (ClusterStatus.latest_export), as status and report.md show it:
// "/runs/x/checkpoints/exports/000003-kept-v000000000744 (kept, version 744)".
std::string ExportSummary(const v1::ExportRecord& record);

}  // namespace syncopate::report

#endif  // SYNCOPATE_LIBS_REPORT_STATUS_VIEW_H_
