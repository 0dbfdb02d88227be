// report.html: RunReportHtml (declared in run_report.h). Everything on the page is derived from
// the RunReport alone, so the benchmark can render the report of any run it has the proto of.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "libs/common/mode_rules.h"
#include "libs/plot/svg_chart.h"
#include "libs/report/run_report.h"
#include "libs/rpc/wire_bytes.h"

namespace syncopate::report {
namespace {

using plot::XmlEscape;

// Two charts side by side fit a 1340 px wide window; each is a figure of its own.
constexpr int kChartWidth = 640;
constexpr int kChartHeight = 300;

// The height of each mode on the timeline (its category on the y axis): its place among the
// modes a shard runs, in the mode table's order. Anything else (which a shard never reports
// while running) is drawn at the first's.
double ModeLevel(v1::Mode mode) {
  double level = 0;
  for (const ModeRules& row : kModeRules) {
    if (!row.shard_runs) continue;
    if (row.mode == mode) return level;
    ++level;
  }
  return 0;
}

plot::LineChart Chart(std::string title, std::string x_label, std::string y_label) {
  plot::LineChart chart;
  chart.title = std::move(title);
  chart.x.label = std::move(x_label);
  chart.y.label = std::move(y_label);
  chart.width = kChartWidth;
  chart.height = kChartHeight;
  chart.x.min = 0;  // time and samples both start at 0: where a curve starts is information
  return chart;
}

plot::BarChart Bars(std::string title, std::string x_label, std::string y_label) {
  plot::BarChart chart;
  chart.title = std::move(title);
  chart.x_label = std::move(x_label);
  chart.y_label = std::move(y_label);
  chart.width = kChartWidth;
  chart.height = kChartHeight;
  return chart;
}

std::string Figure(const std::string& id, const std::string& svg) {
  return absl::StrCat("<figure id=\"", id, "\">\n", svg, "</figure>\n");
}

// Test quality (accuracy or AUC) and test loss from the evaluations, and the workers' mean
// training loss from the timeline, against job time or cluster samples.
std::string QualityFigures(const v1::RunReport& report) {
  const bool auc = report.quality_metric() == "auc";
  const std::string quality = auc ? "test AUC" : "test accuracy (%)";
  std::string html;
  for (const bool by_samples : {false, true}) {
    const std::string x_label = by_samples ? "samples (examples trained)" : "wall time (s)";
    auto x_of_eval = [&](const v1::EvalStatus& e) {
      return by_samples ? static_cast<double>(e.examples_at_eval()) : e.seconds_at_eval();
    };
    plot::LineChart q = Chart(absl::StrCat(auc ? "Test AUC" : "Test accuracy", " vs ",
                                           by_samples ? "samples" : "wall time"),
                              x_label, quality);
    std::vector<plot::Point> points;
    for (const v1::EvalStatus& e : report.eval_history()) {
      points.push_back({x_of_eval(e), auc ? e.auc() : 100 * e.accuracy()});
    }
    q.AddSeries(auc ? "test AUC" : "test accuracy", std::move(points)).dots = true;
    plot::LineChart l =
        Chart(absl::StrCat("Loss vs ", by_samples ? "samples" : "wall time"), x_label, "loss");
    std::vector<plot::Point> test_loss, train_loss;
    for (const v1::EvalStatus& e : report.eval_history()) {
      test_loss.push_back({x_of_eval(e), e.loss()});
    }
    for (const v1::RunReport::Sample& s : report.timeline()) {
      double sum = 0;
      int n = 0;
      for (const v1::RunReport::Sample::Worker& w : s.workers()) {
        if (!w.alive() || w.examples() == 0) continue;  // no step yet: no loss either
        sum += w.loss();
        ++n;
      }
      if (n == 0) continue;
      train_loss.push_back({by_samples ? static_cast<double>(s.examples()) : s.seconds(), sum / n});
    }
    l.AddSeries("test loss", std::move(test_loss)).dots = true;
    plot::Series& train = l.AddSeries("training loss (workers' mean)", std::move(train_loss));
    train.color = plot::PaletteColor(1);
    train.dashed = true;
    const std::string suffix = by_samples ? "samples" : "time";
    absl::StrAppend(&html, Figure("quality-vs-" + suffix, plot::RenderLineChart(q)),
                    Figure("loss-vs-" + suffix, plot::RenderLineChart(l)));
  }
  return html;
}

// One step line per shard (the shard modes as levels) with a marker at every switch. Shards
// are drawn a little apart so shards in the same mode stay visible as separate lines.
std::string ModeFigure(const v1::RunReport& report) {
  plot::LineChart chart = Chart("Aggregation mode per shard", "wall time (s)", "mode");
  for (const ModeRules& row : kModeRules) {
    if (row.shard_runs) chart.y.categories.push_back({ModeLevel(row.mode), std::string(row.name)});
  }
  const double end = std::max(report.training_seconds(), 1e-9);
  const int shards = report.shards_size();
  for (int i = 0; i < shards; ++i) {
    const v1::RunReport::Shard& shard = report.shards(i);
    const double offset = 0.08 * (i - (shards - 1) / 2.0);
    // The mode before the first recorded switch, else the one the shard ended in.
    v1::Mode mode = v1::MODE_UNSPECIFIED;  // drawn at the first level
    if (shard.switches_size() > 0) {
      mode = shard.switches(0).current();
    } else if (absl::StatusOr<v1::Mode> named = ParseMode(shard.mode()); named.ok()) {
      mode = *named;
    }
    std::vector<plot::Point> points = {{0, ModeLevel(mode) + offset}};
    const std::string color = plot::PaletteColor(i);
    for (const v1::ModeDecisionStatus& d : shard.switches()) {
      points.push_back({d.seconds(), ModeLevel(d.recommended()) + offset});
      plot::Marker& m = chart.AddMarker(
          d.seconds(), absl::StrCat("s", shard.shard(), " ", ModeName(d.recommended())),
          absl::StrFormat("shard %d at %.1f s: %s -> %s (%s): %s", shard.shard(), d.seconds(),
                          ModeName(d.current()), ModeName(d.recommended()), d.reason(),
                          d.explanation()));
      m.color = color;
    }
    points.push_back({end, points.back().y});
    plot::Series& s = chart.AddSeries(absl::StrCat("shard ", shard.shard()), std::move(points));
    s.step = true;
    s.color = color;
  }
  return Figure("modes", plot::RenderLineChart(chart));
}

std::string StalenessLabel(const v1::StalenessBucket& b) {
  if (b.max_staleness() < 0) return absl::StrCat(b.min_staleness(), "+");
  if (b.max_staleness() == b.min_staleness()) return absl::StrCat(b.min_staleness());
  return absl::StrCat(b.min_staleness(), "-", b.max_staleness());
}

// Every shard's buckets summed (the shards share the bucket boundaries).
std::string StalenessFigure(const v1::RunReport& report) {
  plot::BarChart chart =
      Bars("Staleness of aggregated gradients (all shards)", "staleness (versions)", "gradients");
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;  // ordered by min, then max
  for (const v1::RunReport::Shard& shard : report.shards()) {
    for (const v1::StalenessBucket& b : shard.staleness()) {
      // The unbounded bucket sorts last.
      const int64_t max = b.max_staleness() < 0 ? INT64_MAX : b.max_staleness();
      counts[{b.min_staleness(), max}] += b.count();
    }
  }
  for (const auto& [range, count] : counts) {
    v1::StalenessBucket b;
    b.set_min_staleness(range.first);
    b.set_max_staleness(range.second == INT64_MAX ? -1 : range.second);
    chart.AddBar(StalenessLabel(b), static_cast<double>(count));
  }
  return Figure("staleness", plot::RenderBarChart(chart));
}

// Each worker's examples per second between consecutive samples, and its mean over the run.
std::string ThroughputFigures(const v1::RunReport& report) {
  plot::LineChart over_time =
      Chart("Throughput per worker", "wall time (s)", "examples per second");
  over_time.y.min = 0;
  std::map<std::string, size_t> index;  // worker name -> colour index, in report order
  for (const v1::RunReport::Worker& w : report.workers()) index.emplace(w.name(), index.size());
  std::map<std::string, std::vector<plot::Point>> rates;
  for (int i = 1; i < report.timeline_size(); ++i) {
    const v1::RunReport::Sample& prev = report.timeline(i - 1);
    const v1::RunReport::Sample& cur = report.timeline(i);
    const double dt = cur.seconds() - prev.seconds();
    if (dt <= 0) continue;
    std::map<std::string, int64_t> before;
    for (const auto& w : prev.workers()) before[w.name()] = w.examples();
    for (const auto& w : cur.workers()) {
      auto it = before.find(w.name());
      if (it == before.end()) continue;
      index.emplace(w.name(), index.size());
      rates[w.name()].push_back(
          {cur.seconds(), static_cast<double>(w.examples() - it->second) / dt});
    }
  }
  for (auto& [name, points] : rates) {
    over_time.AddSeries(name, std::move(points)).color = plot::PaletteColor(index[name]);
  }
  plot::BarChart mean = Bars("Mean throughput per worker", "worker", "examples per second");
  const double seconds = report.training_seconds();
  for (const v1::RunReport::Worker& w : report.workers()) {
    const double rate = seconds > 0 ? static_cast<double>(w.examples()) / seconds : 0;
    plot::Bar& bar = mean.AddBar(w.name(), rate);
    bar.color = plot::PaletteColor(index[w.name()]);
    bar.tooltip = absl::StrFormat("%s: %.0f examples/s (started with slowdown %.2fx)", w.name(),
                                  rate, w.slowdown());
  }
  return Figure("throughput-vs-time", plot::RenderLineChart(over_time)) +
         Figure("throughput-per-worker", plot::RenderBarChart(mean));
}

std::string Row(const std::vector<std::string>& cells, const char* tag = "td") {
  std::string row = "<tr>";
  for (const std::string& c : cells) {
    absl::StrAppend(&row, "<", tag, ">", XmlEscape(c), "</", tag, ">");
  }
  return row + "</tr>\n";
}

std::string SummaryTable(const v1::RunReport& r) {
  const bool has_eval = r.has_final_accuracy();
  std::string html = "<table class=\"summary\">\n";
  html += Row({"mode", r.mode()});
  html += Row({"state", v1::JobState_Name(r.state())});
  html += Row({"final test accuracy",
               has_eval ? absl::StrFormat("%.2f%%", 100 * r.final_accuracy()) : "n/a"});
  html += Row({"final test AUC / loss",
               has_eval ? absl::StrFormat("%.4f / %.4f", r.final_auc(), r.final_loss()) : "n/a"});
  html += Row({"wall time", absl::StrFormat("%.1f s (training %.1f s)", r.wall_seconds(),
                                            r.training_seconds())});
  html += Row({"examples", absl::StrFormat("%d (%.2f epochs)", r.examples(), r.epochs())});
  html += Row({"throughput", absl::StrFormat("%.0f examples/s", r.examples_per_second())});
  html +=
      Row({"wire (workers)", absl::StrFormat("%.0f bytes/example", r.wire_bytes_per_example())});
  html += Row({"global batch", absl::StrCat(r.global_batch())});
  return html + "</table>\n";
}

std::string SwitchTable(const v1::RunReport& report) {
  std::vector<std::pair<double, std::string>> rows;  // by time, then shard
  for (const v1::RunReport::Shard& shard : report.shards()) {
    for (const v1::ModeDecisionStatus& d : shard.switches()) {
      rows.emplace_back(d.seconds(),
                        Row({absl::StrFormat("%.1f", d.seconds()), absl::StrCat(shard.shard()),
                             ModeName(d.current()) + " \u2192 " + ModeName(d.recommended()),
                             d.reason(), d.explanation()}));
    }
  }
  if (rows.empty()) return "<p>No mode switches.</p>\n";
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string html =
      "<table class=\"switches\">\n" + Row({"time (s)", "shard", "switch", "reason", "why"}, "th");
  for (const auto& [seconds, row] : rows) html += row;
  return html + "</table>\n";
}

std::string WorkerTable(const v1::RunReport& report) {
  std::string html =
      "<table>\n" + Row({"worker", "examples", "steps", "median compute (s)",
                         "started with slowdown", "alive at end", "wire bytes/example", "payload"},
                        "th");
  for (const v1::RunReport::Worker& w : report.workers()) {
    html += Row({w.name(), absl::StrCat(w.examples()), absl::StrCat(w.steps()),
                 absl::StrFormat("%.4f", w.median_compute_seconds()),
                 absl::StrFormat("%.2fx", w.slowdown()), w.alive_at_end() ? "yes" : "no",
                 WireBytesCell(w.wire(), w.examples()), rpc::PayloadPath(w.wire())});
  }
  return html + "</table>\n";
}

std::string ShardTable(const v1::RunReport& report) {
  std::string html =
      "<table>\n" + Row({"shard", "version", "mode at end", "applied", "decayed", "dropped",
                         "rejected", "mean staleness", "switches", "wire bytes/example", "payload"},
                        "th");
  for (const v1::RunReport::Shard& s : report.shards()) {
    const v1::GradientCounters& g = s.gradients();
    html += Row({absl::StrCat(s.shard()), absl::StrCat(s.version()), s.mode(),
                 absl::StrCat(g.applied()), absl::StrCat(g.decayed()), absl::StrCat(g.dropped()),
                 absl::StrCat(g.rejected()), absl::StrFormat("%.2f", MeanStaleness(g)),
                 absl::StrCat(s.switches_size()), WireBytesCell(s.wire(), report.examples()),
                 rpc::PayloadPath(s.wire())});
  }
  return html + "</table>\n";
}

// Plain CSS, no web fonts or images: the page must look the same with no network.
constexpr char kStyle[] = R"css(
body { font-family: sans-serif; color: #222; background: #fff; margin: 16px 24px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 24px 0 8px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f4f4f4; }
p.note { color: #555; font-size: 13px; max-width: 1290px; }
)css";

}  // namespace

std::string RunReportHtml(const v1::RunReport& report) {
  const std::string title = absl::StrCat("Syncopate run: ", report.job_id());
  std::string html =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                   XmlEscape(title), "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n<h1>",
                   XmlEscape(title), "</h1>\n", SummaryTable(report));
  absl::StrAppend(&html, "<h2>Quality and loss</h2>\n<div class=\"charts\">\n",
                  QualityFigures(report), "</div>\n");
  absl::StrAppend(&html, "<h2>Aggregation modes and staleness</h2>\n<div class=\"charts\">\n",
                  ModeFigure(report), StalenessFigure(report), "</div>\n", SwitchTable(report));
  absl::StrAppend(&html, "<h2>Workers</h2>\n<div class=\"charts\">\n", ThroughputFigures(report),
                  "</div>\n", WorkerTable(report));
  absl::StrAppend(&html, "<h2>Shards</h2>\n", ShardTable(report));
  absl::StrAppend(
      &html,
      "<p class=\"note\">Times are the coordinator's job time. Evaluations measure parameters "
      "pulled at the time shown; the training loss is the mean of the workers' last step "
      "losses, sampled about once a second. Hover a switch marker or a bar for details; "
      "report.json holds every number.</p>\n");
  return html + "</body>\n</html>\n";
}

}  // namespace syncopate::report
