// Small self-contained SVG charts for reports: a line chart (several series, optional shaded
// bands such as mean ± a 95% interval, step series for timelines, vertical markers with labels)
// and a bar chart (histograms, per-worker numbers). The output is one <svg> element with no
// scripts, no external references and no CSS classes, so it can be inlined in an HTML page or
// saved as a .svg file and looks the same offline.
//
// Every text that comes from the caller (titles, labels, legend names, tooltips) is XML-escaped
// here; callers pass plain text. Output is deterministic: the same chart renders to the same
// bytes, so tests can compare it and reports diff cleanly.
//
// Typical use:
//   plot::LineChart chart;
//   chart.title = "Test accuracy";
//   chart.x.label = "wall time (s)";
//   chart.AddSeries("sync", {{0, 0.1}, {10, 0.8}}).dots = true;
//   std::string svg = plot::RenderLineChart(chart);
//
// Thread-safety: pure functions over value types; thread-safe.
#ifndef SYNCOPATE_LIBS_PLOT_SVG_CHART_H_
#define SYNCOPATE_LIBS_PLOT_SVG_CHART_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syncopate::plot {

struct Point {
  double x = 0;
  double y = 0;
};

// One x of a shaded band: the band covers [low, high] there (e.g. mean ± 95% interval).
struct BandPoint {
  double x = 0;
  double low = 0;
  double high = 0;
};

struct Series {
  std::string name;   // legend text; an empty name keeps the series out of the legend
  std::string color;  // any SVG colour ("#1f77b4", "red"); empty: PaletteColor(series index)
  // Drawn in the given order (sort by x for a curve). A non-finite x or y breaks the line there.
  std::vector<Point> points;
  // A step function: each y holds until the next point's x (a mode timeline, a schedule).
  bool step = false;
  bool dashed = false;
  bool dots = false;  // also draw a dot at every point (sparse measurements such as evaluations)
  // Optional, drawn under the line in the series colour, translucent.
  std::vector<BandPoint> band;
};

// A vertical line across the plot at `x`, with a short label beside it and an optional longer
// tooltip (shown on hover by browsers): an event such as a mode switch and its reason.
struct Marker {
  double x = 0;
  std::string label;
  std::string color;  // empty: dark grey
  std::string tooltip;
};

struct Axis {
  std::string label;
  // Range; each defaults to the data's (bands and markers included), widened to nice ticks.
  std::optional<double> min;
  std::optional<double> max;
  // Named ticks (value, text) that replace the numeric ones, e.g. {0, "sync"}, {1, "gba"} for a
  // mode timeline. The default range then spans the categories with half a step to spare.
  std::vector<std::pair<double, std::string>> categories;
};

struct LineChart {
  std::string title;
  Axis x;
  Axis y;
  std::vector<Series> series;
  std::vector<Marker> markers;
  int width = 640;
  int height = 320;

  // Appends a series (a marker) and returns it for further settings such as a colour or a band.
  // The reference is valid until the next Add. (GCC 12 warns on designated initializers that
  // leave fields out, which -Werror turns into errors: these keep call sites short instead.)
  Series& AddSeries(std::string name, std::vector<Point> points);
  Marker& AddMarker(double x, std::string label, std::string tooltip = "");
};

struct Bar {
  std::string label;    // under the bar (thinned out when the bars are too narrow for all)
  double value = 0;     // non-finite values are drawn as 0
  std::string color;    // empty: the chart's colour
  std::string tooltip;  // empty: "label: value"
};

struct BarChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Bar> bars;
  std::string color;  // default bar colour; empty: PaletteColor(0)
  int width = 640;
  int height = 320;

  Bar& AddBar(std::string label, double value);
};

// The chart as one <svg> element (ends with a newline). A chart with no finite data renders its
// frame and "no data" instead of failing: a report of a run that measured nothing still renders.
std::string RenderLineChart(const LineChart& chart);
std::string RenderBarChart(const BarChart& chart);

// Tick values covering [lo, hi] with a step of 1, 2 or 5 times a power of ten, at most
// `max_ticks` of them (at least 2 when lo < hi), all within [lo, hi]. lo == hi gives {lo}.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);
// The nice step NiceTicks uses for [lo, hi].
double NiceStep(double lo, double hi, int max_ticks);
// A tick's text: as many decimals as `step` needs, thousands as "k" and millions as "M"
// (e.g. 1500000 with step 500000 -> "1.5M", 0.25 with step 0.05 -> "0.25").
std::string FormatTick(double value, double step);

// Text made safe for XML character data and attribute values (either quote): & < > " ' are
// escaped and control characters XML 1.0 forbids are dropped.
std::string XmlEscape(std::string_view text);

// The default series colours (Tableau 10, distinguishable and colour-blind tolerant), cycled.
const std::string& PaletteColor(size_t index);

}  // namespace syncopate::plot

#endif  // SYNCOPATE_LIBS_PLOT_SVG_CHART_H_
