#include "bench/straggler_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/plot/svg_chart.h"

namespace syncopate::bench {
namespace {

using stats::Direction;
using stats::Interval;
using stats::Verdict;

const Scenario* FindScenario(const std::string& id) {
  for (const Scenario& s : AllScenarios()) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

bool IsCtr(const std::string& scenario) {
  const Scenario* s = FindScenario(scenario);
  return s != nullptr && s->ctr;
}

double TargetOf(const std::string& scenario, const ReportOptions& options) {
  return IsCtr(scenario) ? options.target_auc : options.target_accuracy;
}

// A number for JSON: finite values only (JSON has no NaN or infinity).
std::string Number(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Quality as a person reads it: accuracy in percent, AUC as is.
std::string Quality(const std::string& scenario, double q) {
  return IsCtr(scenario) ? absl::StrFormat("%.4f", q) : absl::StrFormat("%.2f%%", 100 * q);
}

// "[low, high]" with `decimals` decimals (and a sign when `signed_values`), or "[unbounded]".
std::string Bounds(const Interval& i, int decimals, bool signed_values = false) {
  if (!std::isfinite(i.low) || !std::isfinite(i.high)) return "[unbounded]";
  return signed_values ? absl::StrFormat("[%+.*f, %+.*f]", decimals, i.low, decimals, i.high)
                       : absl::StrFormat("[%.*f, %.*f]", decimals, i.low, decimals, i.high);
}

std::string QualityCell(const CellSummary& c) {
  if (c.finished == 0) return "no finished run";
  std::string cell = Quality(c.scenario, c.mean_quality);
  if (!c.quality_interval.has_value()) return cell;
  const Interval& i = *c.quality_interval;
  return IsCtr(c.scenario) ? absl::StrFormat("%s [%.4f, %.4f]", cell, i.low, i.high)
                           : absl::StrFormat("%s [%.2f, %.2f]", cell, 100 * i.low, 100 * i.high);
}

std::string TimeCell(const CellSummary& c) {
  const size_t reached = c.time_to_target.size();
  if (c.finished == 0) return "-";
  if (reached == 0) return "not reached";
  const double mean = stats::Summarize(c.time_to_target).mean;
  if (static_cast<int>(reached) < c.finished) {
    // The censored runs would only have added later times: this mean flatters the policy.
    return absl::StrFormat("(%.1f over the %d that reached it)", mean, reached);
  }
  if (!c.time_interval.has_value()) return absl::StrFormat("%.1f", mean);
  return absl::StrFormat("%.1f [%.1f, %.1f]", mean, c.time_interval->low, c.time_interval->high);
}

const CellSummary* FindCell(const std::vector<CellSummary>& cells, const std::string& scenario,
                            const std::string& policy) {
  for (const CellSummary& c : cells) {
    if (c.scenario == scenario && c.policy == policy) return &c;
  }
  return nullptr;
}

// The verdict on "time(tested) <= bound x time(reference)", with the censoring rule of the
// header: a ratio interval when both reached the target in every finished run, a count
// comparison when one side always and the other never reached it, undecided otherwise.
Verdict TimeRatioVerdict(const CellSummary& tested, const CellSummary& reference, double bound,
                         std::string* evidence) {
  const int k_t = static_cast<int>(tested.time_to_target.size());
  const int k_r = static_cast<int>(reference.time_to_target.size());
  const std::string counts =
      absl::StrFormat("reached %d/%d vs %d/%d", k_t, tested.finished, k_r, reference.finished);
  const std::string name = absl::StrCat(tested.policy, "/", reference.policy);
  if (tested.finished < 2 || reference.finished < 2) {
    *evidence = absl::StrCat(name, ": needs 2 finished runs each (", counts, ")");
    return Verdict::kUndecided;
  }
  const bool all_t = k_t == tested.finished, all_r = k_r == reference.finished;
  if (all_t && all_r) {
    const absl::StatusOr<Interval> ratio =
        stats::FiellerRatioInterval(tested.time_to_target, reference.time_to_target, kConfidence);
    if (!ratio.ok()) {
      *evidence = absl::StrCat(name, ": ", ratio.status().message());
      return Verdict::kUndecided;
    }
    *evidence = absl::StrFormat("%s %.2f %s", name, ratio->estimate, Bounds(*ratio, 2));
    return stats::ReadVerdict(*ratio, Direction::kAtMost, bound);
  }
  if (all_t && k_r == 0) {
    *evidence = absl::StrCat(name, ": only ", tested.policy, " reached the target (", counts, ")");
    return Verdict::kMet;
  }
  if (k_t == 0 && all_r) {
    *evidence =
        absl::StrCat(name, ": only ", reference.policy, " reached the target (", counts, ")");
    return Verdict::kNotMet;
  }
  *evidence = absl::StrCat(name, ": censored runs, no honest interval (", counts, ")");
  return Verdict::kUndecided;
}

// The verdict on "quality(tested) within the margin of quality(sync)", non-inferiority:
// being better than sync is fine. MLP: Welch interval of the accuracy difference in points
// against −0.3; ctr: Fieller interval of the AUC ratio against 1 − 0.1%.
Verdict QualityVerdict(const CellSummary& tested, const CellSummary& sync, std::string* evidence) {
  if (tested.final_quality.size() < 2 || sync.final_quality.size() < 2) {
    *evidence =
        absl::StrFormat("needs 2 finished runs each (%d vs %d)", tested.finished, sync.finished);
    return Verdict::kUndecided;
  }
  if (IsCtr(tested.scenario)) {
    const absl::StatusOr<Interval> ratio =
        stats::FiellerRatioInterval(tested.final_quality, sync.final_quality, kConfidence);
    if (!ratio.ok()) {
      *evidence = std::string(ratio.status().message());
      return Verdict::kUndecided;
    }
    const Interval relative{100 * (ratio->estimate - 1), 100 * (ratio->low - 1),
                            100 * (ratio->high - 1), ratio->df};
    *evidence = absl::StrFormat("AUC %s/sync − 1: %+.3f%% %s", tested.policy, relative.estimate,
                                Bounds(relative, 3, true));
    return stats::ReadVerdict(*ratio, Direction::kAtLeast, 1 - 0.001);
  }
  std::vector<double> a, b;
  for (double q : tested.final_quality) a.push_back(100 * q);
  for (double q : sync.final_quality) b.push_back(100 * q);
  const absl::StatusOr<Interval> difference = stats::WelchDifferenceInterval(a, b, kConfidence);
  if (!difference.ok()) {
    *evidence = std::string(difference.status().message());
    return Verdict::kUndecided;
  }
  *evidence = absl::StrFormat("accuracy %s − sync: %+.2f points %s", tested.policy,
                              difference->estimate, Bounds(*difference, 2, true));
  return stats::ReadVerdict(*difference, Direction::kAtLeast, -0.3);
}

// "met" for all parts met, "not met" if any part is not met, else undecided: a goal over several
// comparisons holds only if each does.
Verdict AllOf(const std::vector<Verdict>& parts) {
  if (parts.empty()) return Verdict::kUndecided;
  bool all_met = true;
  for (Verdict v : parts) {
    if (v == Verdict::kNotMet) return Verdict::kNotMet;
    all_met = all_met && v == Verdict::kMet;
  }
  return all_met ? Verdict::kMet : Verdict::kUndecided;
}

std::vector<std::string> ScenarioOrder(const std::vector<CellSummary>& cells) {
  std::vector<std::string> order;
  for (const CellSummary& c : cells) {
    if (std::find(order.begin(), order.end(), c.scenario) == order.end()) {
      order.push_back(c.scenario);
    }
  }
  return order;
}

}  // namespace

const std::vector<Scenario>& AllScenarios() {
  static const auto* const kAll = new std::vector<Scenario>{
      {"a", "no straggler", {1, 1, 1, 1}},
      {"b", "one worker 4x slower", {1, 1, 1, 4}},
      {"c", "one worker 4x slower, middle third", {1, 1, 1, 1}, /*transient=*/true},
      {"d", "half the workers 2x slower", {1, 1, 2, 2}},
      {"ctr",
       "wide & deep on CTR data, one worker 4x slower",
       {1, 1, 1, 4},
       false,
       /*ctr=*/true},
  };
  return *kAll;
}

absl::StatusOr<Selection> ParseSelection(const std::string& scenarios, const std::string& policies,
                                         int seeds) {
  Selection selection;
  for (absl::string_view id : absl::StrSplit(scenarios, ',', absl::SkipWhitespace())) {
    const Scenario* s = FindScenario(std::string(id));
    if (s == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--scenarios: unknown scenario '", id, "' (known: a, b, c, d, ctr)"));
    }
    selection.scenarios.push_back(*s);
  }
  for (absl::string_view policy : absl::StrSplit(policies, ',', absl::SkipWhitespace())) {
    if (absl::StatusOr<v1::Mode> mode = ParseMode(policy); !mode.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--policies: ", mode.status().message()));
    }
    selection.policies.emplace_back(policy);
  }
  if (selection.scenarios.empty()) return absl::InvalidArgumentError("--scenarios is empty");
  if (selection.policies.empty()) return absl::InvalidArgumentError("--policies is empty");
  if (seeds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--seeds must be at least 1, got ", seeds));
  }
  for (int k = 1; k <= seeds; ++k) selection.seeds.push_back(static_cast<uint64_t>(k));
  return selection;
}

std::optional<double> TimeToTarget(const std::vector<EvalPoint>& curve, double target) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].quality < target) continue;
    if (i == 0) return curve[0].seconds;
    const EvalPoint& before = curve[i - 1];
    const double fraction = (target - before.quality) / (curve[i].quality - before.quality);
    return before.seconds + fraction * (curve[i].seconds - before.seconds);
  }
  return std::nullopt;
}

std::vector<CellSummary> Summarize(const std::vector<RunResult>& runs,
                                   const ReportOptions& options) {
  std::vector<CellSummary> cells;
  for (const RunResult& run : runs) {
    CellSummary* cell = nullptr;
    for (CellSummary& c : cells) {
      if (c.scenario == run.scenario && c.policy == run.policy) cell = &c;
    }
    if (cell == nullptr) {
      cell = &cells.emplace_back();
      cell->scenario = run.scenario;
      cell->policy = run.policy;
    }
    ++cell->runs;
    if (!run.finished) continue;
    ++cell->finished;
    cell->final_quality.push_back(run.final_quality);
    const std::optional<double> t = TimeToTarget(run.curve, TargetOf(run.scenario, options));
    if (t.has_value()) cell->time_to_target.push_back(*t);
    cell->mean_wall_seconds += run.wall_seconds;
    cell->mean_switches += run.switches_per_shard;
    cell->mean_loss += run.final_loss;
    cell->mean_wire_bytes_per_example += run.wire_bytes_per_example;
  }
  for (CellSummary& c : cells) {
    if (c.finished == 0) continue;
    c.mean_wall_seconds /= c.finished;
    c.mean_switches /= c.finished;
    c.mean_loss /= c.finished;
    c.mean_wire_bytes_per_example /= c.finished;
    c.mean_quality = stats::Summarize(c.final_quality).mean;
    if (absl::StatusOr<Interval> i = stats::MeanInterval(c.final_quality, kConfidence); i.ok()) {
      c.quality_interval = *i;
    }
    if (static_cast<int>(c.time_to_target.size()) == c.finished) {
      if (absl::StatusOr<Interval> i = stats::MeanInterval(c.time_to_target, kConfidence); i.ok()) {
        c.time_interval = *i;
      }
    }
  }
  return cells;
}

std::vector<GoalVerdict> Verdicts(const std::vector<CellSummary>& cells,
                                  const ReportOptions& options) {
  std::vector<GoalVerdict> verdicts;
  for (const std::string& scenario : ScenarioOrder(cells)) {
    const CellSummary* auto_cell = FindCell(cells, scenario, "auto");
    const CellSummary* sync = FindCell(cells, scenario, "sync");
    // auto <= 1.05 x min over fixed p of time(p)  <=>  auto <= 1.05 x time(p) for every p, so
    // the goal needs no "best" policy picked from noisy means (which would bias against auto).
    if (auto_cell != nullptr) {
      std::vector<Verdict> parts;
      std::vector<std::string> evidence;
      for (const CellSummary& c : cells) {
        if (c.scenario != scenario || c.policy == "auto") continue;
        std::string e;
        parts.push_back(TimeRatioVerdict(*auto_cell, c, 1.05, &e));
        evidence.push_back(e);
      }
      if (!parts.empty()) {
        verdicts.push_back({"auto's time to target <= 1.05x the best fixed policy's", scenario,
                            AllOf(parts), absl::StrJoin(evidence, "; ")});
      }
    }
    for (const char* policy : {"gba", "auto"}) {
      const CellSummary* tested = FindCell(cells, scenario, policy);
      if (tested == nullptr || sync == nullptr) continue;
      std::string e;
      const Verdict v = QualityVerdict(*tested, *sync, &e);
      verdicts.push_back({absl::StrCat(policy,
                                       IsCtr(scenario) ? "'s AUC within 0.1% (relative) of sync's"
                                                       : "'s accuracy within 0.3 points of sync's",
                                       " at equal samples"),
                          scenario, v, e});
    }
    if (scenario == "b" && auto_cell != nullptr && sync != nullptr) {
      std::string e;
      const Verdict v = TimeRatioVerdict(*auto_cell, *sync, 0.6, &e);
      verdicts.push_back(
          {"under one 4x straggler, auto's time to target <= 0.6x sync's", scenario, v, e});
    }
    if (IsCtr(scenario)) {
      // Issue 4's goals for the ctr workload, read the same way.
      const CellSummary* gba = FindCell(cells, scenario, "gba");
      const CellSummary* async = FindCell(cells, scenario, "async");
      if (gba != nullptr && async != nullptr) {
        GoalVerdict g{"gba's AUC >= naive async's + 0.002", scenario, Verdict::kUndecided, ""};
        absl::StatusOr<Interval> d =
            stats::WelchDifferenceInterval(gba->final_quality, async->final_quality, kConfidence);
        if (d.ok()) {
          g.verdict = stats::ReadVerdict(*d, Direction::kAtLeast, 0.002);
          g.evidence = absl::StrFormat("gba − async %+.4f %s", d->estimate, Bounds(*d, 4, true));
        } else {
          g.evidence = std::string(d.status().message());
        }
        verdicts.push_back(g);
      }
      if (sync != nullptr && options.bayes_auc > 0) {
        GoalVerdict g{"sync's AUC within 0.01 of the Bayes AUC", scenario, Verdict::kUndecided, ""};
        if (sync->quality_interval.has_value()) {
          const Interval& i = *sync->quality_interval;
          g.verdict = stats::ReadVerdict(i, Direction::kAtLeast, options.bayes_auc - 0.01);
          g.evidence = absl::StrFormat("sync %.4f %s, Bayes %.4f", i.estimate, Bounds(i, 4),
                                       options.bayes_auc);
        } else {
          g.evidence = "needs 2 finished runs";
        }
        verdicts.push_back(g);
      }
    }
  }
  return verdicts;
}

std::string ResultsMarkdown(const Selection& selection, const std::vector<CellSummary>& cells,
                            const std::vector<GoalVerdict>& verdicts,
                            const ReportOptions& options) {
  const int64_t samples = options.epochs * options.samples_per_epoch;
  const size_t k = selection.seeds.size();
  std::string md = "# Straggler benchmark\n\n";
  if (!options.machine.empty()) absl::StrAppend(&md, "Machine: ", options.machine, ".\n\n");
  absl::StrAppendFormat(
      &md,
      "Every scenario x policy ran with %d job seed%s (1..%d: parameter initialisation and data "
      "order differ; everything else is the same job). Default MLP job: G=256, 4 workers, 2 "
      "shards, %d epoch(s) = %d samples per run, same hyperparameters in every mode and scenario. "
      "Every worker's compute is padded %.0fx with sleep, so the workers need about one of the "
      "machine's two cores: the figures measure coordination, not CPU contention.\n\n",
      k, k == 1 ? "" : "s", k, options.epochs, samples, options.base_slowdown);
  md +=
      "How to read it: each cell is the mean over seeds and, in brackets, its 95% confidence "
      "interval (Student t with n − 1 degrees of freedom; none with one run). Time to target is "
      "where the evaluator's curve first crosses the target, interpolated linearly between the two "
      "evaluations around the crossing. A run that never reaches the target is counted in "
      "\"reached k/n\", never dropped: the time interval is given only when every finished run "
      "reached it (otherwise the mean over those that did is shown in parentheses, a figure that "
      "flatters the policy). Goal verdicts are read from 95% intervals of a ratio of mean times "
      "(Fieller) or a difference of mean qualities (Welch): **met** if the whole interval "
      "satisfies the goal, **not met** if the whole interval violates it, **undecided** if it "
      "straddles the bound. A policy that reached the target in every run meets a time goal "
      "against one that never did; any other mix of censored runs is undecided. Intervals are "
      "per comparison (no multiplicity correction); \"auto vs the best fixed policy\" is met only "
      "if auto meets it against every fixed policy.\n\n";
  md += "## Goals\n\n| goal | scenario | verdict | evidence (95% intervals) |\n|---|---|---|---|\n";
  for (const GoalVerdict& g : verdicts) {
    absl::StrAppendFormat(&md, "| %s | %s | **%s** | %s |\n", g.goal, g.scenario,
                          stats::VerdictName(g.verdict), g.evidence);
  }
  if (verdicts.empty()) {
    md += "| (no goal applies to the selected scenarios and policies) | | | |\n";
  }
  bool any_mlp = false;
  for (const CellSummary& c : cells) any_mlp = any_mlp || !IsCtr(c.scenario);
  if (any_mlp) {
    absl::StrAppendFormat(
        &md,
        "\n## MLP scenarios\n\n| scenario | policy | finished | accuracy at %d samples | time to "
        "%.0f%% (s) | reached | wall (s) | switches/shard | wire B/example |\n"
        "|---|---|---|---|---|---|---|---|---|\n",
        samples, 100 * options.target_accuracy);
    for (const CellSummary& c : cells) {
      if (IsCtr(c.scenario)) continue;
      absl::StrAppendFormat(&md, "| %s | %s | %d/%d | %s | %s | %d/%d | %.1f | %.1f | %.0f |\n",
                            c.scenario, c.policy, c.finished, c.runs, QualityCell(c), TimeCell(c),
                            c.time_to_target.size(), c.finished, c.mean_wall_seconds,
                            c.mean_switches, c.mean_wire_bytes_per_example);
    }
  }
  bool any_ctr = false;
  for (const CellSummary& c : cells) any_ctr = any_ctr || IsCtr(c.scenario);
  if (any_ctr) {
    absl::StrAppendFormat(
        &md,
        "\n## CTR: DeepFM, one worker 4x slower\n\nexamples/ctr_deepfm.textproto on generated "
        "Criteo-format data (planted teacher, the same data for every seed); test AUC and logloss "
        "from the final evaluation, at the same number of samples for every policy. The "
        "teacher's Bayes-optimal test AUC is %.4f (logloss %.4f); the time-to-target target is "
        "AUC %.4f.\n\n| policy | finished | test AUC | AUC − Bayes | logloss | time to AUC %.4f "
        "(s) | reached | wall (s) | switches/shard | wire B/example |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n",
        options.bayes_auc, options.bayes_logloss, options.target_auc, options.target_auc);
    for (const CellSummary& c : cells) {
      if (!IsCtr(c.scenario)) continue;
      absl::StrAppendFormat(
          &md, "| %s | %d/%d | %s | %+.4f | %.4f | %s | %d/%d | %.1f | %.1f | %.0f |\n", c.policy,
          c.finished, c.runs, QualityCell(c), c.mean_quality - options.bayes_auc, c.mean_loss,
          TimeCell(c), c.time_to_target.size(), c.finished, c.mean_wall_seconds, c.mean_switches,
          c.mean_wire_bytes_per_example);
    }
  }
  md +=
      "\n![quality vs wall time, mean and 95% band over seeds](accuracy_vs_time.svg)\n\n"
      "Per-run numbers and curves: results.json.\n";
  return md;
}

std::string ResultsJson(const Selection& selection, const std::vector<RunResult>& runs,
                        const std::vector<CellSummary>& cells,
                        const std::vector<GoalVerdict>& verdicts, const ReportOptions& options) {
  std::vector<std::string> scenario_ids;
  for (const Scenario& s : selection.scenarios) scenario_ids.push_back(Quote(s.id));
  std::vector<std::string> policies;
  for (const std::string& p : selection.policies) policies.push_back(Quote(p));
  std::string json = absl::StrFormat(
      "{\n  \"config\": {\"scenarios\": [%s], \"policies\": [%s], \"seeds\": %d, \"epochs\": %d, "
      "\"base_slowdown\": %s, \"target_accuracy\": %s, \"target_auc\": %s, \"bayes_auc\": %s, "
      "\"confidence\": %s, \"interval\": \"Student t; difference: Welch; ratio: Fieller\", "
      "\"machine\": %s},\n"
      "  \"runs\": [\n",
      absl::StrJoin(scenario_ids, ", "), absl::StrJoin(policies, ", "), selection.seeds.size(),
      options.epochs, Number(options.base_slowdown), Number(options.target_accuracy),
      // No ctr scenario ran: no AUC target or Bayes AUC (null rather than a misleading 0).
      options.bayes_auc > 0 ? Number(options.target_auc) : "null",
      options.bayes_auc > 0 ? Number(options.bayes_auc) : "null", Number(kConfidence),
      Quote(options.machine));
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    const std::optional<double> t = TimeToTarget(r.curve, TargetOf(r.scenario, options));
    std::vector<std::string> curve;
    for (const EvalPoint& p : r.curve) {
      curve.push_back(
          absl::StrFormat("[%s, %d, %s]", Number(p.seconds), p.examples, Number(p.quality)));
    }
    absl::StrAppendFormat(
        &json,
        "    {\"scenario\": %s, \"policy\": %s, \"seed\": %d, \"finished\": %s, "
        "\"wall_seconds\": %s, \"examples\": %d, \"final_quality\": %s, \"final_loss\": %s, "
        "\"time_to_target_seconds\": %s, \"switches_per_shard\": %s, "
        "\"wire_bytes_per_example\": %s,\n"
        "     \"curve_seconds_examples_quality\": [%s]}%s\n",
        Quote(r.scenario), Quote(r.policy), r.seed, r.finished ? "true" : "false",
        Number(r.wall_seconds), r.examples, Number(r.final_quality), Number(r.final_loss),
        t.has_value() ? Number(*t) : "null", Number(r.switches_per_shard),
        Number(r.wire_bytes_per_example), absl::StrJoin(curve, ", "),
        i + 1 < runs.size() ? "," : "");
  }
  json += "  ],\n  \"cells\": [\n";
  auto interval = [](const std::optional<Interval>& i) {
    return i.has_value() ? absl::StrFormat("[%s, %s]", Number(i->low), Number(i->high))
                         : std::string("null");
  };
  for (size_t i = 0; i < cells.size(); ++i) {
    const CellSummary& c = cells[i];
    const stats::SampleSummary q = stats::Summarize(c.final_quality);
    const stats::SampleSummary t = stats::Summarize(c.time_to_target);
    absl::StrAppendFormat(
        &json,
        "    {\"scenario\": %s, \"policy\": %s, \"runs\": %d, \"finished\": %d, \"reached\": %d, "
        "\"quality_mean\": %s, \"quality_std\": %s, \"quality_interval\": %s, "
        "\"time_to_target_mean_of_reached\": %s, \"time_to_target_std\": %s, "
        "\"time_to_target_interval\": %s, \"wall_seconds_mean\": %s, \"loss_mean\": %s, "
        "\"switches_per_shard_mean\": %s, \"wire_bytes_per_example_mean\": %s}%s\n",
        Quote(c.scenario), Quote(c.policy), c.runs, c.finished, c.time_to_target.size(),
        q.n > 0 ? Number(q.mean) : "null", q.n > 1 ? Number(q.std_dev) : "null",
        interval(c.quality_interval), t.n > 0 ? Number(t.mean) : "null",
        t.n > 1 ? Number(t.std_dev) : "null", interval(c.time_interval),
        Number(c.mean_wall_seconds), Number(c.mean_loss), Number(c.mean_switches),
        Number(c.mean_wire_bytes_per_example), i + 1 < cells.size() ? "," : "");
  }
  json += "  ],\n  \"verdicts\": [\n";
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const GoalVerdict& g = verdicts[i];
    absl::StrAppendFormat(&json,
                          "    {\"goal\": %s, \"scenario\": %s, \"verdict\": %s, \"evidence\": "
                          "%s}%s\n",
                          Quote(g.goal), Quote(g.scenario), Quote(stats::VerdictName(g.verdict)),
                          Quote(g.evidence), i + 1 < verdicts.size() ? "," : "");
  }
  return json + "  ]\n}\n";
}

std::vector<BandPoint> QualityBand(const std::vector<const RunResult*>& runs,
                                   const std::vector<double>& grid) {
  std::vector<BandPoint> band;
  for (double t : grid) {
    std::vector<double> values;
    for (const RunResult* r : runs) {
      if (r->curve.empty() || t < r->curve.front().seconds) break;
      // Linear between evaluations, held at the last one after it.
      double v = r->curve.back().quality;
      for (size_t i = 1; i < r->curve.size(); ++i) {
        const EvalPoint &a = r->curve[i - 1], &b = r->curve[i];
        if (t <= b.seconds) {
          v = b.seconds > a.seconds
                  ? a.quality + (t - a.seconds) / (b.seconds - a.seconds) * (b.quality - a.quality)
                  : b.quality;
          break;
        }
      }
      values.push_back(v);
    }
    if (values.size() != runs.size() || values.empty()) continue;
    BandPoint p{t, stats::Summarize(values).mean, 0, 0};
    p.low = p.high = p.mean;
    if (absl::StatusOr<Interval> i = stats::MeanInterval(values, kConfidence); i.ok()) {
      p.low = i->low;
      p.high = i->high;
    }
    band.push_back(p);
  }
  return band;
}

std::string AccuracySvg(const Selection& selection, const std::vector<RunResult>& runs,
                        const ReportOptions& options) {
  // One chart per scenario, side by side in one image; a policy keeps its colour in every panel.
  constexpr int kWidth = 480, kHeight = 340;
  std::string panels;
  int x = 0;
  for (const Scenario& scenario : selection.scenarios) {
    double max_t = 1;
    for (const RunResult& r : runs) {
      if (r.scenario == scenario.id && r.finished) max_t = std::max(max_t, r.wall_seconds);
    }
    std::vector<double> grid;
    for (int i = 0; i <= 100; ++i) grid.push_back(max_t * i / 100);
    plot::LineChart chart;
    chart.title = absl::StrCat("(", scenario.id, ") ", scenario.title);
    chart.x.label = "wall time (s)";
    chart.y.label =
        absl::StrCat(scenario.ctr ? "test AUC" : "test accuracy", ": mean over seeds, 95% band");
    chart.x.min = 0;
    chart.x.max = max_t;
    // Fixed ranges so panels compare at a glance and a wide band (few seeds) cannot squash the
    // curves: accuracy 50..95%, AUC 0.5..0.85 (the generated data's Bayes AUC is ~0.80).
    chart.y.min = 0.5;
    chart.y.max = scenario.ctr ? 0.85 : 0.95;
    chart.width = kWidth;
    chart.height = kHeight;
    for (size_t k = 0; k < selection.policies.size(); ++k) {
      std::vector<const RunResult*> group;
      for (const RunResult& r : runs) {
        if (r.scenario == scenario.id && r.policy == selection.policies[k] && r.finished) {
          group.push_back(&r);
        }
      }
      const std::vector<BandPoint> band = QualityBand(group, grid);
      if (band.empty()) continue;
      std::vector<plot::Point> mean;
      std::vector<plot::BandPoint> interval;
      for (const BandPoint& b : band) {
        mean.push_back({b.seconds, b.mean});
        interval.push_back({b.seconds, b.low, b.high});
      }
      plot::Series& series = chart.AddSeries(selection.policies[k], std::move(mean));
      series.color = plot::PaletteColor(k);
      series.band = std::move(interval);
    }
    const double target = TargetOf(scenario.id, options);
    plot::Series& line = chart.AddSeries(absl::StrCat("target ", Quality(scenario.id, target)),
                                         {{0, target}, {max_t, target}});
    line.color = "#777777";
    line.dashed = true;
    absl::StrAppendFormat(&panels, "<g transform=\"translate(%d,0)\">\n%s</g>\n", x,
                          plot::RenderLineChart(chart));
    x += kWidth;
  }
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n%s</svg>\n",
      x, kHeight, panels);
}

}  // namespace syncopate::bench
