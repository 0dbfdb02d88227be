// The run report of `syncopate local`: built from the coordinator's last ClusterStatus, written
// as <run_dir>/report.json (protobuf's JSON printer: escaping and number formatting are the
// library's, not ours) and <run_dir>/report.md (the same as tables).
// Thread-safety: pure functions; thread-safe (files: one writer per run directory).
#ifndef SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_
#define SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/report.pb.h"

namespace syncopate::report {

// `slowdowns` are the per-worker factors the run was started with (missing entries mean 1),
// matched to the training workers in id order.
v1::RunReport BuildRunReport(const v1::ClusterStatus& status, double wall_seconds,
                             const std::vector<double>& slowdowns);

// report.json's text: the JSON mapping with the proto's field names and every field printed.
absl::StatusOr<std::string> RunReportJson(const v1::RunReport& report);
// report.md's text.
std::string RunReportMarkdown(const v1::RunReport& report);

// Writes <run_dir>/report.json and <run_dir>/report.md.
absl::Status WriteRunReport(const std::string& run_dir, const v1::RunReport& report);

}  // namespace syncopate::report

#endif  // SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_
