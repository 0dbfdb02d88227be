#include "libs/report/run_report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"
#include "libs/common/mode_rules.h"
#include "libs/report/status_view.h"
#include "libs/rpc/wire_bytes.h"

namespace syncopate::report {

v1::RunReport BuildRunReport(const v1::ClusterStatus& status, double wall_seconds,
                             const std::vector<double>& slowdowns,
                             const std::vector<v1::RunReport::Sample>& timeline) {
  v1::RunReport report;
  report.set_job_id(status.job_id());
  report.set_mode(ModeName(status.job_mode()));
  report.set_state(status.state());
  if (status.has_last_eval()) {
    report.set_final_accuracy(status.last_eval().accuracy());
    report.set_final_loss(status.last_eval().loss());
    report.set_final_auc(status.last_eval().auc());
  }
  // From the job's start to its stop condition (the final evaluation and the drain are not
  // training); a status without it (an older coordinator) gives its elapsed time.
  const double training =
      status.training_seconds() > 0 ? status.training_seconds() : status.elapsed_seconds();
  report.set_wall_seconds(wall_seconds);
  report.set_training_seconds(training);
  report.set_examples(status.examples());
  report.set_epochs(status.epoch());
  report.set_examples_per_second(training > 0 ? static_cast<double>(status.examples()) / training
                                              : 0);
  report.set_global_batch(status.global_batch());
  size_t index = 0;
  for (const v1::WorkerStatus& w : status.workers()) {
    if (w.role() != v1::ROLE_WORKER) continue;
    v1::RunReport::Worker* worker = report.add_workers();
    worker->set_name(w.name());
    worker->set_examples(w.examples());
    worker->set_steps(w.steps());
    worker->set_median_compute_seconds(w.median_compute_seconds());
    worker->set_slowdown(index < slowdowns.size() ? slowdowns[index] : 1.0);
    worker->set_alive_at_end(w.alive());
    *worker->mutable_wire() = w.wire();
    worker->set_wire_bytes_per_example(WireBytesPerExample(w.wire(), w.examples()));
    ++index;
  }
  for (const v1::ShardStatus& s : status.shards()) {
    v1::RunReport::Shard* shard = report.add_shards();
    shard->set_shard(s.shard_id());
    shard->set_version(s.version());
    shard->set_mode(ModeName(s.mode()));
    *shard->mutable_gradients() = s.gradients();
    *shard->mutable_staleness() = s.staleness();
    *shard->mutable_switches() = s.switch_history();
    *shard->mutable_wire() = s.wire();
    shard->set_wire_bytes_per_example(WireBytesPerExample(s.wire(), status.examples()));
  }
  report.set_wire_bytes_per_example(WorkersWireBytesPerExample(status));
  *report.mutable_eval_history() = status.eval_history();
  if (status.has_kept_eval()) *report.mutable_kept_eval() = status.kept_eval();
  if (status.has_latest_export()) *report.mutable_latest_export() = status.latest_export();
  report.set_early_stop_reason(status.early_stop_reason());
  for (const v1::RunReport::Sample& sample : timeline) *report.add_timeline() = sample;
  return report;
}

double MeanStaleness(const v1::GradientCounters& gradients) {
  const int64_t aggregated = gradients.applied() + gradients.decayed();
  return aggregated > 0
             ? static_cast<double>(gradients.staleness_sum()) / static_cast<double>(aggregated)
             : 0.0;
}

double WorkersWireBytesPerExample(const v1::ClusterStatus& status) {
  int64_t bytes = 0;
  int64_t examples = 0;
  for (const v1::WorkerStatus& w : status.workers()) {
    if (w.role() != v1::ROLE_WORKER) continue;
    bytes += rpc::TotalWireBytes(w.wire());
    examples += w.examples();
  }
  return examples > 0 ? static_cast<double>(bytes) / static_cast<double>(examples) : 0.0;
}

double WireBytesPerExample(const v1::WireBytes& wire, int64_t examples) {
  return examples > 0
             ? static_cast<double>(rpc::TotalWireBytes(wire)) / static_cast<double>(examples)
             : 0.0;
}

std::string WireBytesCell(const v1::WireBytes& wire, int64_t examples) {
  if (examples <= 0) return "n/a";
  const double per = static_cast<double>(examples);
  const int64_t total = rpc::TotalWireBytes(wire);
  const int64_t sent = wire.sent_dense() + wire.sent_sparse() + wire.sent_header();
  const int64_t dense = wire.sent_dense() + wire.received_dense();
  return absl::StrFormat("%.0f (sent %.0f / received %.0f; %.1f%% dense)", total / per, sent / per,
                         (total - sent) / per,
                         total > 0 ? 100.0 * static_cast<double>(dense) / total : 0.0);
}

absl::StatusOr<std::string> RunReportJson(const v1::RunReport& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(report, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("report.json: ", status.ToString()));
  }
  return json;
}

std::string RunReportMarkdown(const v1::RunReport& report) {
  const bool has_eval = report.has_final_accuracy();
  std::string md = absl::StrCat("# Syncopate run: ", report.job_id(), "\n\n");
  absl::StrAppend(&md, "| | |\n|---|---|\n");
  absl::StrAppend(&md, "| mode | ", report.mode(), " |\n");
  absl::StrAppend(&md, "| final test accuracy | ",
                  has_eval ? absl::StrFormat("%.2f%%", 100 * report.final_accuracy()) : "n/a",
                  " |\n");
  absl::StrAppend(
      &md, "| final test AUC / loss | ",
      has_eval ? absl::StrFormat("%.4f / %.4f", report.final_auc(), report.final_loss()) : "n/a",
      " |\n");
  if (report.has_kept_eval()) {
    // The version the validation set chose (the test set never chooses); its test scores are
    // the run's result.
    absl::StrAppend(&md, "| kept version (best on validation) | ",
                    KeptVersionSummary(report.kept_eval()), " |\n");
  }
  if (!report.early_stop_reason().empty()) {
    absl::StrAppend(&md, "| stopped early | ", report.early_stop_reason(), " |\n");
  }
  if (report.has_latest_export()) {
    absl::StrAppend(&md, "| latest export | ", ExportSummary(report.latest_export()), " |\n");
  }
  absl::StrAppend(&md, absl::StrFormat("| wall time | %.1f s (training %.1f s) |\n",
                                       report.wall_seconds(), report.training_seconds()));
  absl::StrAppend(&md, absl::StrFormat("| examples | %d (%.2f epochs) |\n", report.examples(),
                                       report.epochs()));
  absl::StrAppend(
      &md, absl::StrFormat("| throughput | %.0f examples/s |\n", report.examples_per_second()));
  absl::StrAppend(&md, absl::StrFormat("| wire (workers) | %.0f bytes/example |\n\n",
                                       report.wire_bytes_per_example()));
  absl::StrAppend(
      &md,
      "| worker | examples | steps | median compute (s) | wire bytes/example | payload |\n"
      "|---|---|---|---|---|---|\n");
  for (const v1::RunReport::Worker& w : report.workers()) {
    absl::StrAppend(
        &md, absl::StrFormat("| %s | %d | %d | %.4f | %s | %s |\n", w.name(), w.examples(),
                             w.steps(), w.median_compute_seconds(),
                             WireBytesCell(w.wire(), w.examples()), rpc::PayloadPath(w.wire())));
  }
  absl::StrAppend(&md,
                  "\n| shard | version | mode | mean staleness | wire bytes/example | payload |\n"
                  "|---|---|---|---|---|---|\n");
  for (const v1::RunReport::Shard& s : report.shards()) {
    absl::StrAppend(&md, absl::StrFormat("| %d | %d | %s | %.2f | %s | %s |\n", s.shard(),
                                         s.version(), s.mode(), MeanStaleness(s.gradients()),
                                         WireBytesCell(s.wire(), report.examples()),
                                         rpc::PayloadPath(s.wire())));
  }
  return md;
}

absl::Status WriteRunReport(const std::string& run_dir, const v1::RunReport& report) {
  absl::StatusOr<std::string> json = RunReportJson(report);
  if (!json.ok()) return json.status();
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"report.json", *json},
                                   {"report.md", RunReportMarkdown(report)},
                                   {"report.html", RunReportHtml(report)}}) {
    const std::string path = absl::StrCat(run_dir, "/", name);
    std::ofstream out(path);
    out << text;
    if (!out.flush()) return absl::UnavailableError("cannot write " + path);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::report
