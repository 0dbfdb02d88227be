// The run report of `syncopate local`: built from the coordinator's last ClusterStatus and the
// run's timeline (run_timeline.h), written as <run_dir>/report.json (protobuf's JSON printer:
// escaping and number formatting are the library's, not ours), <run_dir>/report.md (tables)
// and <run_dir>/report.html (the same with charts: self-contained, inline SVG, no scripts).
// Thread-safety: pure functions; thread-safe (files: one writer per run directory).
#ifndef SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_
#define SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/job.pb.h"
#include "syncopate/v1/report.pb.h"

namespace syncopate::report {

// `slowdowns` are the per-worker factors the run was started with (missing entries mean 1),
// matched to the training workers in id order. `timeline`: RunTimeline::samples() of the run.
v1::RunReport BuildRunReport(const v1::ClusterStatus& status, double wall_seconds,
                             const std::vector<double>& slowdowns,
                             const std::vector<v1::RunReport::Sample>& timeline = {});

// The mean staleness of the pushes a shard aggregated (applied and decayed); 0 when none was.
double MeanStaleness(const v1::GradientCounters& gradients);

// The training workers' Train-stream bytes, both directions, over their examples (the
// evaluator's pulls are not training's cost); 0 before any example. RunReport's headline.
double WorkersWireBytesPerExample(const v1::ClusterStatus& status);
// `wire`'s bytes, both directions, per example (0 without examples).
double WireBytesPerExample(const v1::WireBytes& wire, int64_t examples);
// One table cell for `wire` over `examples`: "14702 (sent 7351 / received 7351; 99.9% dense)",
// bytes per example; "n/a" without examples.
std::string WireBytesCell(const v1::WireBytes& wire, int64_t examples);

// report.json's text: the JSON mapping with the proto's field names and every field printed.
absl::StatusOr<std::string> RunReportJson(const v1::RunReport& report);
// report.md's text.
std::string RunReportMarkdown(const v1::RunReport& report);
// report.html's text: one page with no external references and no scripts, showing test
// accuracy (AUC for CTR jobs) and loss against wall time and against samples, each shard's mode
// over time with the switches and their reasons, the staleness histogram and per-worker
// throughput, then the tables of report.md. Charts are inline SVG (libs/plot).
std::string RunReportHtml(const v1::RunReport& report);

// Writes <run_dir>/report.json, <run_dir>/report.md and <run_dir>/report.html.
absl::Status WriteRunReport(const std::string& run_dir, const v1::RunReport& report);

}  // namespace syncopate::report

#endif  // SYNCOPATE_LIBS_REPORT_RUN_REPORT_H_
