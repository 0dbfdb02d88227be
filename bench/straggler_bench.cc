// The straggler benchmark (issue 3): scenarios x aggregation policies on real local clusters.
//
//   syncopate-straggler-bench --out=bench-results/straggler [--epochs=3] [--scenarios=a,b,c,d]
//
// Every run uses the same job (the default MLP on Fashion-MNIST, G=256, 4 workers, 2 shards,
// same seed and hyperparameters) and differs only in the policy and the emulated machine speeds.
// Scenario "ctr" runs examples/ctr_wdl.textproto (wide & deep, Adagrad) instead, on
// planted-teacher Criteo-format data it generates, with one 4x straggler, and compares each
// policy's test AUC at equal samples with the teacher's Bayes-optimal AUC.
// Every worker's compute is padded by a base factor (sleep, not spin), so the four workers
// together need about one core of this two-core machine: the figures measure coordination,
// not CPU contention. Writes results.md (table), results.json and accuracy_vs_time.svg.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "libs/data/ctr_generator.h"
#include "libs/job/job_spec.h"
#include "libs/launch/local_cluster.h"
#include "libs/runtime/process_runtime.h"
#include "libs/shard/shard_metrics.h"

ABSL_FLAG(std::string, out, "bench-results/straggler", "Results directory");
ABSL_FLAG(std::string, bin_dir, "", "Directory of the service binaries (default: next to this)");
ABSL_FLAG(int, epochs, 3, "Epochs per run (the fixed sample budget)");
ABSL_FLAG(double, base_slowdown, 4.0,
          "Padding factor of every worker, so 4 workers use about one core");
ABSL_FLAG(std::string, scenarios, "a,b,c,d,ctr",
          "Which scenarios to run (a-d: MLP; ctr: wide & deep)");
ABSL_FLAG(std::string, policies, "sync,async,gba,auto", "Which policies to run");
ABSL_FLAG(double, target_accuracy, 0.85, "Accuracy for the time-to-target column");
ABSL_FLAG(std::string, ctr_job, "examples/ctr_wdl.textproto", "Job of the ctr scenario");
ABSL_FLAG(int64_t, ctr_train_rows, 400000, "Training rows the ctr scenario generates");
ABSL_FLAG(int64_t, ctr_test_rows, 50000, "Test rows the ctr scenario generates");

namespace syncopate::bench {
namespace {

struct Scenario {
  std::string id;
  std::string title;
  std::vector<double> factors;  // relative to the base padding
  bool transient = false;       // worker 3 is 4x slower during the middle third only
};

struct Point {
  double seconds;
  int64_t examples;
  double accuracy;
};

// The ctr scenario's data: generated once per output directory (same teacher for both files).
struct CtrData {
  std::string train_path;
  std::string test_path;
  double bayes_auc = 0;
  double bayes_logloss = 0;
};

struct Run {
  std::string scenario;
  std::string policy;
  double wall_seconds = 0;
  double time_to_target = -1;  // -1: not reached
  double final_accuracy = 0;
  int64_t examples = 0;
  double switches = 0;  // per shard
  double final_auc = 0;
  double final_loss = 0;
  std::vector<Point> curve;
  bool ok = false;
};

absl::StatusOr<CtrData> GenerateCtrData(const std::string& dir) {
  std::filesystem::create_directories(dir);
  CtrData data{dir + "/ctr_train.tsv.gz", dir + "/ctr_test.tsv.gz", 0, 0};
  const data::CtrTeacherConfig teacher;  // the defaults: one teacher for both files
  absl::StatusOr<data::CtrGenerationReport> train = data::GenerateCtr(
      teacher, /*sample_seed=*/1, absl::GetFlag(FLAGS_ctr_train_rows), data.train_path);
  if (!train.ok()) return train.status();
  absl::StatusOr<data::CtrGenerationReport> test = data::GenerateCtr(
      teacher, /*sample_seed=*/2, absl::GetFlag(FLAGS_ctr_test_rows), data.test_path);
  if (!test.ok()) return test.status();
  data.bayes_auc = test->bayes_auc;
  data.bayes_logloss = test->bayes_logloss;
  printf("ctr data: %ld train / %ld test rows, positive rate %.3f, test Bayes AUC %.4f\n",
         static_cast<long>(train->rows), static_cast<long>(test->rows), test->positive_rate,
         test->bayes_auc);
  return data;
}

Run RunOne(const Scenario& scenario, const std::string& policy, double transient_seconds,
           const CtrData* ctr) {
  Run run;
  run.scenario = scenario.id;
  run.policy = policy;
  v1::JobSpec job;
  if (ctr != nullptr) {
    absl::StatusOr<v1::JobSpec> loaded = job::LoadJobSpecFile(absl::GetFlag(FLAGS_ctr_job));
    if (!loaded.ok()) {
      fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      return run;
    }
    job = *loaded;
    job.mutable_dataset()->set_train_path(ctr->train_path);
    job.mutable_dataset()->set_test_path(ctr->test_path);
  } else {
    job = *job::ParseJobSpec(job::DefaultJobText());
    job.mutable_stop()->set_epochs(absl::GetFlag(FLAGS_epochs));
  }
  job.set_job_id(absl::StrCat("bench-", scenario.id, "-", policy));
  job.set_mode(*job::ParseMode(policy));
  job.mutable_eval()->set_interval_seconds(2);
  launch::LocalClusterOptions options;
  options.job = job;
  options.bin_dir = absl::GetFlag(FLAGS_bin_dir).empty() ? runtime::ExecutableDir()
                                                         : absl::GetFlag(FLAGS_bin_dir);
  options.run_dir = absl::StrCat(absl::GetFlag(FLAGS_out), "/runs/", scenario.id, "-", policy);
  std::filesystem::remove_all(options.run_dir);
  const double base = absl::GetFlag(FLAGS_base_slowdown);
  for (double f : scenario.factors) options.slowdowns.push_back(base * f);
  if (scenario.transient) {
    const double third = transient_seconds / 3;
    options.slowdown_schedules[3] =
        absl::StrFormat("0s:%g,%gs:%g,%gs:%g", base, third, 4 * base, 2 * third, base);
  }
  const absl::Time start = absl::Now();
  auto cluster = launch::LocalCluster::Start(options);
  if (!cluster.ok()) {
    fprintf(stderr, "%s/%s: %s\n", scenario.id.c_str(), policy.c_str(),
            std::string(cluster.status().message()).c_str());
    return run;
  }
  v1::ClusterStatus last;
  const absl::Time deadline = start + absl::Minutes(15);
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    auto status = (*cluster)->Status();
    if (!status.ok()) continue;
    last = *status;
    if (last.state() == v1::JOB_DONE) break;
  }
  (*cluster)->Stop();
  run.ok = last.state() == v1::JOB_DONE;
  run.wall_seconds = last.elapsed_seconds();
  run.examples = last.examples();
  run.final_accuracy = last.last_eval().accuracy();
  run.final_auc = last.last_eval().auc();
  run.final_loss = last.last_eval().loss();
  for (const v1::EvalStatus& e : last.eval_history()) {
    run.curve.push_back({e.seconds_at_eval(), e.examples_at_eval(), e.accuracy()});
    if (run.time_to_target < 0 && e.accuracy() >= absl::GetFlag(FLAGS_target_accuracy)) {
      run.time_to_target = e.seconds_at_eval();
    }
  }
  for (const v1::ShardStatus& s : last.shards()) run.switches += s.switches();
  if (last.shards_size() > 0) run.switches /= last.shards_size();
  if (ctr != nullptr) {
    printf(
        "%s %-5s: %s, %.1f s, %ld examples, test AUC %.4f (Bayes %.4f), logloss %.4f, "
        "switches/shard %.1f\n",
        scenario.id.c_str(), policy.c_str(), run.ok ? "done" : "DID NOT FINISH", run.wall_seconds,
        static_cast<long>(run.examples), run.final_auc, ctr->bayes_auc, run.final_loss,
        run.switches);
    fflush(stdout);
    return run;
  }
  printf("%s %-5s: %s, %.1f s, final accuracy %.2f%%, time to %.0f%%: %s, switches/shard %.1f\n",
         scenario.id.c_str(), policy.c_str(), run.ok ? "done" : "DID NOT FINISH", run.wall_seconds,
         100 * run.final_accuracy, 100 * absl::GetFlag(FLAGS_target_accuracy),
         run.time_to_target < 0 ? "not reached"
                                : absl::StrFormat("%.1f s", run.time_to_target).c_str(),
         run.switches);
  fflush(stdout);
  return run;
}

std::string Svg(const std::vector<Scenario>& scenarios, const std::vector<Run>& runs,
                const std::vector<std::string>& policies) {
  const int panel_w = 420, panel_h = 300, margin = 50;
  const std::vector<std::string> colors = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  double max_t = 1;
  for (const Run& r : runs) max_t = std::max(max_t, r.wall_seconds);
  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' "
      "font-size='11'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
      static_cast<int>(scenarios.size()) * (panel_w + margin) + margin, panel_h + 2 * margin + 30);
  for (size_t p = 0; p < scenarios.size(); ++p) {
    const int x0 = margin + static_cast<int>(p) * (panel_w + margin), y0 = margin;
    auto X = [&](double t) { return x0 + t / max_t * panel_w; };
    auto Y = [&](double a) { return y0 + panel_h - (a - 0.5) / 0.45 * panel_h; };  // 50..95%
    absl::StrAppendFormat(&svg,
                          "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#888'/>\n"
                          "<text x='%d' y='%d' font-weight='bold'>(%s) %s</text>\n",
                          x0, y0, panel_w, panel_h, x0, y0 - 8, scenarios[p].id,
                          scenarios[p].title);
    for (double a : {0.6, 0.7, 0.8, 0.85, 0.9}) {
      absl::StrAppendFormat(&svg,
                            "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#ddd'/>"
                            "<text x='%d' y='%.1f' text-anchor='end'>%.0f%%</text>\n",
                            x0, x0 + panel_w, Y(a), Y(a), x0 - 4, Y(a) + 4, 100 * a);
    }
    absl::StrAppendFormat(
        &svg, "<text x='%d' y='%d' text-anchor='middle'>wall time (s), 0..%.0f</text>\n",
        x0 + panel_w / 2, y0 + panel_h + 16, max_t);
    for (size_t k = 0; k < policies.size(); ++k) {
      for (const Run& r : runs) {
        if (r.scenario != scenarios[p].id || r.policy != policies[k] || r.curve.empty()) continue;
        std::vector<std::string> pts;
        for (const Point& pt : r.curve) {
          pts.push_back(
              absl::StrFormat("%.1f,%.1f", X(pt.seconds), Y(std::clamp(pt.accuracy, 0.5, 0.95))));
        }
        absl::StrAppendFormat(
            &svg, "<polyline fill='none' stroke='%s' stroke-width='1.6' points='%s'/>\n",
            colors[k % colors.size()], absl::StrJoin(pts, " "));
      }
    }
  }
  for (size_t k = 0; k < policies.size(); ++k) {
    absl::StrAppendFormat(&svg,
                          "<rect x='%d' y='%d' width='14' height='4' fill='%s'/><text x='%d' "
                          "y='%d'>%s</text>\n",
                          margin + static_cast<int>(k) * 90, panel_h + 2 * margin + 10,
                          colors[k % colors.size()], margin + static_cast<int>(k) * 90 + 18,
                          panel_h + 2 * margin + 15, policies[k]);
  }
  return svg + "</svg>\n";
}

// The ctr scenario's table and the three goals, computed from this run's numbers.
std::string CtrTable(const std::vector<Run>& runs, const CtrData& ctr) {
  std::string md = absl::StrFormat(
      "\n## CTR: wide & deep, one worker 4x slower\n\n"
      "examples/ctr_wdl.textproto on generated Criteo-format data (planted teacher); test AUC "
      "and logloss from the final evaluation, at the same number of samples for every policy. "
      "The teacher's Bayes-optimal test AUC is %.4f (logloss %.4f).\n\n"
      "| policy | test AUC | AUC vs Bayes | logloss | samples | wall (s) | switches/shard |\n"
      "|---|---|---|---|---|---|---|\n",
      ctr.bayes_auc, ctr.bayes_logloss);
  const Run* by_policy[4] = {nullptr, nullptr, nullptr, nullptr};
  const char* names[4] = {"sync", "async", "gba", "auto"};
  for (const Run& r : runs) {
    if (r.scenario != "ctr") continue;
    md += absl::StrFormat("| %s | %.4f | %+.4f | %.4f | %d | %.1f | %.1f |\n", r.policy,
                          r.final_auc, r.final_auc - ctr.bayes_auc, r.final_loss, r.examples,
                          r.wall_seconds, r.switches);
    for (int k = 0; k < 4; ++k) {
      if (r.policy == names[k] && r.ok) by_policy[k] = &r;
    }
  }
  const Run *sync = by_policy[0], *async = by_policy[1], *gba = by_policy[2];
  md += "\nGoals (issue 4):\n\n";
  if (sync != nullptr && gba != nullptr) {
    const double relative = (gba->final_auc - sync->final_auc) / sync->final_auc;
    md += absl::StrFormat("- gba within 0.1%% (relative) of sync's AUC: %+.3f%% -> %s\n",
                          100 * relative,
                          std::abs(relative) <= 0.001 || relative > 0 ? "met" : "NOT met");
  }
  if (async != nullptr && gba != nullptr) {
    const double gain = gba->final_auc - async->final_auc;
    md += absl::StrFormat("- gba >= naive async + 0.2%% AUC: %+.4f -> %s\n", gain,
                          gain >= 0.002 ? "met" : "NOT met");
  }
  if (sync != nullptr) {
    const double gap = ctr.bayes_auc - sync->final_auc;
    md += absl::StrFormat("- model (sync) AUC within 0.01 of the Bayes AUC: gap %.4f -> %s\n", gap,
                          gap <= 0.01 ? "met" : "NOT met");
  }
  return md;
}

int Main() {
  const std::vector<Scenario> all = {
      {"a", "no straggler", {1, 1, 1, 1}},
      {"b", "one worker 4x slower", {1, 1, 1, 4}},
      {"c", "one worker 4x slower, middle third", {1, 1, 1, 1}, true},
      {"d", "half the workers 2x slower", {1, 1, 2, 2}},
      {"ctr", "wide & deep on CTR data, one worker 4x slower", {1, 1, 1, 4}},
  };
  std::vector<Scenario> scenarios;
  for (absl::string_view id : absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',')) {
    for (const Scenario& s : all) {
      if (s.id == id) scenarios.push_back(s);
    }
  }
  const std::vector<std::string> policies = absl::StrSplit(absl::GetFlag(FLAGS_policies), ',');
  const std::string out = absl::GetFlag(FLAGS_out);
  std::filesystem::create_directories(out);
  printf(
      "straggler benchmark: %zu scenarios x %zu policies, %d epochs each, base padding %.0fx "
      "(4 workers ~ 1 core of 2: coordination, not CPU contention)\n",
      scenarios.size(), policies.size(), absl::GetFlag(FLAGS_epochs),
      absl::GetFlag(FLAGS_base_slowdown));
  std::vector<Run> runs;
  std::optional<CtrData> ctr;
  double transient_seconds = 0;
  for (const Scenario& scenario : scenarios) {
    if (scenario.id == "ctr" && !ctr.has_value()) {
      absl::StatusOr<CtrData> generated = GenerateCtrData(out + "/data");
      if (!generated.ok()) {
        fprintf(stderr, "ctr data: %s\n", std::string(generated.status().message()).c_str());
        return 1;
      }
      ctr = *generated;
    }
    for (const std::string& policy : policies) {
      runs.push_back(RunOne(scenario, policy, transient_seconds > 0 ? transient_seconds : 60,
                            scenario.id == "ctr" ? &*ctr : nullptr));
      // The transient straggler spans the middle third of a no-straggler sync run's length.
      if (scenario.id == "a" && policy == "sync") transient_seconds = runs.back().wall_seconds;
    }
  }

  std::ofstream md(out + "/results.md");
  md << "# Straggler benchmark\n\n"
     << absl::StrFormat(
            "Default MLP job (G=256, 4 workers, 2 shards, momentum 0.05/0.9), %d epochs = %d "
            "samples per run, same seed and hyperparameters everywhere. Every worker's compute is "
            "padded %.0fx with sleep, so the workers need about one of the machine's two cores: "
            "the figures measure coordination, not CPU contention. Time to %.0f%% is when the "
            "evaluator (every 2 s, full test set) first measured it.\n\n",
            absl::GetFlag(FLAGS_epochs), absl::GetFlag(FLAGS_epochs) * 60000,
            absl::GetFlag(FLAGS_base_slowdown), 100 * absl::GetFlag(FLAGS_target_accuracy))
     << absl::StrFormat(
            "| scenario | policy | time to %.0f%% (s) | accuracy at %d samples | wall (s) | "
            "switches/shard |\n",
            100 * absl::GetFlag(FLAGS_target_accuracy), absl::GetFlag(FLAGS_epochs) * 60000)
     << "|---|---|---|---|---|---|\n";
  for (const Run& r : runs) {
    if (r.scenario == "ctr") continue;
    md << absl::StrFormat(
        "| %s | %s | %s | %.2f%% | %.1f | %.1f |\n", r.scenario, r.policy,
        r.time_to_target < 0 ? "not reached" : absl::StrFormat("%.1f", r.time_to_target),
        100 * r.final_accuracy, r.wall_seconds, r.switches);
  }
  md << "\n![accuracy vs wall time](accuracy_vs_time.svg)\n";
  if (ctr.has_value()) md << CtrTable(runs, *ctr);
  std::ofstream json(out + "/results.json");
  json << "[\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    json << absl::StrFormat(
        "  {\"scenario\": \"%s\", \"policy\": \"%s\", \"finished\": %s, \"wall_seconds\": %.2f, "
        "\"time_to_target_seconds\": %s, \"final_accuracy\": %.5f, \"examples\": %d, "
        "\"switches_per_shard\": %.1f, \"final_auc\": %.5f, \"final_loss\": %.5f}%s\n",
        r.scenario, r.policy, r.ok ? "true" : "false", r.wall_seconds,
        r.time_to_target < 0 ? "null" : absl::StrFormat("%.2f", r.time_to_target), r.final_accuracy,
        r.examples, r.switches, r.final_auc, r.final_loss, i + 1 < runs.size() ? "," : "");
  }
  json << "]\n";
  std::ofstream(out + "/accuracy_vs_time.svg") << Svg(scenarios, runs, policies);
  printf("results: %s/results.md\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return syncopate::bench::Main();
}
