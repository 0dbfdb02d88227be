#include "libs/report/status_view.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "libs/common/mode_rules.h"
#include "libs/report/run_report.h"
#include "libs/rpc/wire_bytes.h"

namespace syncopate::report {
namespace {

std::string ModeList(const v1::ClusterStatus& status) {
  std::vector<std::string> parts;
  for (const v1::ShardStatus& s : status.shards()) {
    parts.push_back(absl::StrCat("v", s.version(), " ", ModeName(s.mode())));
  }
  return absl::StrJoin(parts, ", ");
}

// The status tables' "wire B/ex": what `wire` moved per example, "-" before any example.
std::string BytesPerExample(const v1::WireBytes& wire, int64_t examples) {
  return examples > 0 ? absl::StrFormat("%.0f", WireBytesPerExample(wire, examples)) : "-";
}

// "worker", "worker(2)" for a process standing for 2 logical workers, or "evaluator".
std::string Role(const v1::WorkerStatus& w) {
  if (w.role() != v1::ROLE_WORKER) return "evaluator";
  return w.logical_workers() > 1 ? absl::StrCat("worker(", w.logical_workers(), ")") : "worker";
}

}  // namespace

std::string ProgressLine(const v1::ClusterStatus& status) {
  std::string accuracy = "-";
  if (status.has_last_eval()) {
    accuracy = absl::StrFormat("%.2f%% auc %.4f", 100 * status.last_eval().accuracy(),
                               status.last_eval().auc());
  }
  return absl::StrFormat("[%6.1fs] epoch %.2f  examples %d  %.0f ex/s  shards: %s  test acc %s",
                         status.elapsed_seconds(), status.epoch(), status.examples(),
                         status.examples_per_second(), ModeList(status), accuracy);
}

std::string StatusText(const v1::ClusterStatus& s) {
  std::string out = absl::StrFormat(
      "job %s: %s, %.1f s, epoch %.2f, %d examples, %.0f ex/s, G=%d\n", s.job_id(),
      absl::StrCat(v1::JobState_Name(s.state()),
                   s.held() ? " (held until `syncopate release`)" : ""),
      s.elapsed_seconds(), s.epoch(), s.examples(), s.examples_per_second(), s.global_batch());
  absl::StrAppend(
      &out, absl::StrFormat("\n%-12s %-4s %-9s %-6s %10s %7s %12s %8s %9s %-8s %9s %s\n", "worker",
                            "id", "role", "alive", "examples", "batch", "compute(s)", "loss",
                            "wire B/ex", "payload", "slowdown", "straggler"));
  for (const v1::WorkerStatus& w : s.workers()) {
    const bool trainer = w.role() == v1::ROLE_WORKER;
    const std::string slowdown =
        trainer && w.slowdown() > 0 ? absl::StrFormat("%.2fx", w.slowdown()) : "-";
    const std::string straggler =
        w.straggler() ? absl::StrFormat("YES (z %.1f)", w.robust_z()) : "";
    absl::StrAppend(&out,
                    absl::StrFormat("%-12s %-4d %-9s %-6s %10d %7d %12.4f %8.4f %9s %-8s %9s %s\n",
                                    w.name(), w.worker_id(), Role(w), w.alive() ? "yes" : "no",
                                    w.examples(), w.local_batch(), w.median_compute_seconds(),
                                    w.last_loss(), BytesPerExample(w.wire(), w.examples()),
                                    rpc::PayloadPath(w.wire()), slowdown, straggler));
  }
  absl::StrAppend(&out,
                  absl::StrFormat("\n%-6s %-22s %-9s %8s %-6s %9s %8s %9s %9s %9s  %s\n", "shard",
                                  "address", "connected", "version", "mode", "applied", "dropped",
                                  "rejected", "staleness", "wire B/ex", "barrier waits for"));
  for (const v1::ShardStatus& sh : s.shards()) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-6d %-22s %-9s %8d %-6s %9d %8d %9d %9.2f %9s  %s\n", sh.shard_id(),
                  sh.address(), sh.connected() ? "yes" : "no", sh.version(), ModeName(sh.mode()),
                  sh.gradients().applied(), sh.gradients().dropped(), sh.gradients().rejected(),
                  MeanStaleness(sh.gradients()), BytesPerExample(sh.wire(), s.examples()),
                  absl::StrJoin(sh.barrier_waiting_for(), ",")));
  }
  for (const v1::ShardStatus& sh : s.shards()) {
    if (!sh.has_last_decision()) continue;
    const v1::ModeDecisionStatus& d = sh.last_decision();
    absl::StrAppend(&out,
                    absl::StrFormat("\nshard %d mode policy (%d switches so far), at %.1fs: %s\n",
                                    sh.shard_id(), sh.switches(), d.seconds(), d.explanation()));
    if (sh.has_last_switch()) {
      absl::StrAppend(&out,
                      absl::StrFormat("  last switch at %.1fs: %s\n", sh.last_switch().seconds(),
                                      sh.last_switch().explanation()));
    }
  }
  for (const v1::WorkerStatus& w : s.workers()) {
    if (!w.failure().empty()) absl::StrAppend(&out, w.name(), " failed: ", w.failure(), "\n");
  }
  if (s.has_last_eval()) {
    absl::StrAppend(&out,
                    absl::StrFormat("\nlast evaluation: accuracy %.2f%%, AUC %.4f, loss %.4f%s\n",
                                    100 * s.last_eval().accuracy(), s.last_eval().auc(),
                                    s.last_eval().loss(), s.last_eval().final() ? " (final)" : ""));
  }
  if (s.has_kept_eval()) {
    absl::StrAppend(&out, "kept version (best on validation): ", KeptVersionSummary(s.kept_eval()),
                    "\n");
  }
  if (!s.early_stop_reason().empty()) {
    absl::StrAppend(&out, "stopped early: ", s.early_stop_reason(), "\n");
  }
  if (s.has_latest_export()) {
    absl::StrAppend(&out, "latest export: ", ExportSummary(s.latest_export()), "\n");
  }
  return out;
}

std::string KeptVersionSummary(const v1::EvalStatus& kept) {
  return absl::StrFormat(
      "test accuracy %.2f%%, AUC %.4f, loss %.4f of %s at %d examples (validation AUC %.4f, "
      "accuracy %.2f%%)",
      100 * kept.accuracy(), kept.auc(), kept.loss(),
      kept.final() ? "the final parameters" : absl::StrCat("point ", kept.point()),
      kept.examples_at_eval(), kept.validation().auc(), 100 * kept.validation().accuracy());
}

std::string ExportSummary(const v1::ExportRecord& record) {
  return absl::StrCat(record.path(), " (", record.source(), ", version ",
                      absl::StrJoin(record.versions(), ","), ")");
}

}  // namespace syncopate::report
