#include "libs/plot/svg_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace syncopate::plot {
namespace {

// Layout in pixels. Left leaves room for y tick labels such as "1500k" and a rotated axis label.
constexpr double kMarginLeft = 64;
constexpr double kMarginRight = 20;
constexpr double kMarginBottom = 44;
constexpr double kTitleHeight = 24;
constexpr double kLegendRowHeight = 18;
constexpr double kTopPadding = 10;
// An estimate of the width of one character at the 12 px sans-serif font the charts use: text
// cannot be measured without a browser, and legends and bar labels only need to avoid overlaps.
constexpr double kCharWidth = 6.6;
// Aim for a tick every ~80 px along x and every ~40 px along y: readable without crowding.
constexpr double kPixelsPerXTick = 80;
constexpr double kPixelsPerYTick = 40;
constexpr char kAxisColor[] = "#888888";
constexpr char kGridColor[] = "#e6e6e6";
constexpr char kTextColor[] = "#333333";
constexpr char kMarkerColor[] = "#555555";

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

bool Finite(double v) { return std::isfinite(v); }

// The drawable rectangle of a chart.
struct Frame {
  double left = 0;
  double top = 0;
  double right = 0;
  double bottom = 0;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

// Maps data [lo, hi] onto pixels [from, to] (to < from for y, which grows downwards).
struct Scale {
  double lo = 0;
  double hi = 1;
  double from = 0;
  double to = 1;
  double operator()(double v) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

// A range that always has width: a single value v becomes [v - d, v + d].
std::pair<double, double> Widen(double lo, double hi) {
  if (lo < hi) return {lo, hi};
  const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
  return {lo - d, hi + d};
}

// The axis range for data [lo, hi]: the axis's own min/max where set, otherwise the data's,
// widened outwards to whole ticks so the curve never touches an unlabelled edge.
std::pair<double, double> AxisRange(const Axis& axis, double lo, double hi, int max_ticks) {
  if (!axis.categories.empty()) {
    double cmin = axis.categories.front().first, cmax = cmin;
    for (const auto& [value, text] : axis.categories) {
      cmin = std::min(cmin, value);
      cmax = std::max(cmax, value);
    }
    // Half the spacing of evenly spaced categories to spare on each side.
    const double n = static_cast<double>(axis.categories.size());
    const double half = cmax > cmin ? (cmax - cmin) / (2 * (n - 1)) : 0.5;
    return Widen(axis.min.value_or(cmin - half), axis.max.value_or(cmax + half));
  }
  if (axis.min) lo = *axis.min;
  if (axis.max) hi = *axis.max;
  if (!(lo <= hi)) {  // no data at all (or min > max): show an empty unit range
    lo = axis.min.value_or(0);
    hi = lo + 1;
  }
  std::tie(lo, hi) = Widen(lo, hi);
  const double step = NiceStep(lo, hi, max_ticks);
  if (!axis.min) lo = std::floor(lo / step + 1e-9) * step;
  if (!axis.max) hi = std::ceil(hi / step - 1e-9) * step;
  return {lo, hi};
}

// Ticks (value, text) of an axis over [lo, hi].
std::vector<std::pair<double, std::string>> AxisTicks(const Axis& axis, double lo, double hi,
                                                      int max_ticks) {
  if (!axis.categories.empty()) return axis.categories;
  std::vector<std::pair<double, std::string>> ticks;
  const double step = NiceStep(lo, hi, max_ticks);
  for (double v : NiceTicks(lo, hi, max_ticks)) ticks.emplace_back(v, FormatTick(v, step));
  return ticks;
}

int TickBudget(double pixels, double per_tick) {
  return std::max(2, static_cast<int>(pixels / per_tick) + 1);
}

std::string SvgOpen(int width, int height, const std::string& title) {
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n",
      width, height, width, height);
  absl::StrAppend(&svg, "<title>", XmlEscape(title), "</title>\n");
  absl::StrAppendFormat(&svg, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width,
                        height);
  if (!title.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%s\" y=\"17\" font-size=\"14\" font-weight=\"bold\" "
                          "fill=\"%s\">%s</text>\n",
                          Num(kMarginLeft), kTextColor, XmlEscape(title));
  }
  return svg;
}

// Grid lines, tick labels and axis labels (the frame comes last: AppendFrame).
void AppendAxes(const Frame& f, const Scale& sx, const Scale& sy,
                const std::vector<std::pair<double, std::string>>& xticks,
                const std::vector<std::pair<double, std::string>>& yticks,
                const std::string& x_label, const std::string& y_label, int height,
                std::string& svg) {
  for (const auto& [v, text] : yticks) {
    const double y = sy(v);
    if (y < f.top - 0.5 || y > f.bottom + 0.5) continue;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" "
                          "shape-rendering=\"crispEdges\"/>\n"
                          "<text x=\"%s\" y=\"%s\" text-anchor=\"end\" fill=\"%s\">%s</text>\n",
                          Num(f.left), Num(y), Num(f.right), Num(y), kGridColor, Num(f.left - 6),
                          Num(y + 4), kTextColor, XmlEscape(text));
  }
  for (const auto& [v, text] : xticks) {
    const double x = sx(v);
    if (x < f.left - 0.5 || x > f.right + 0.5) continue;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" "
                          "shape-rendering=\"crispEdges\"/>\n"
                          "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                          Num(x), Num(f.top), Num(x), Num(f.bottom), kGridColor, Num(x),
                          Num(f.bottom + 16), kTextColor, XmlEscape(text));
  }
  if (!x_label.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                          Num((f.left + f.right) / 2), height - 8, kTextColor, XmlEscape(x_label));
  }
  if (!y_label.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text transform=\"translate(14,%s) rotate(-90)\" "
                          "text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                          Num((f.top + f.bottom) / 2), kTextColor, XmlEscape(y_label));
  }
}

// The plot's frame, drawn over everything so no curve or bar hides it, with crisp 1 px edges
// (a rectangle on whole pixels would otherwise be antialiased across two).
void AppendFrame(const Frame& f, std::string& svg) {
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" "
                        "stroke=\"%s\" shape-rendering=\"crispEdges\"/>\n",
                        Num(f.left), Num(f.top), Num(f.width()), Num(f.height()), kAxisColor);
}

void AppendNoData(const Frame& f, std::string& svg) {
  absl::StrAppendFormat(
      &svg, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" fill=\"%s\">no data</text>\n",
      Num((f.left + f.right) / 2), Num((f.top + f.bottom) / 2), kAxisColor);
}

// A clipPath id for the frame. Ids are global to an HTML page that inlines several charts;
// deriving the id from the rectangle itself makes equal ids mean equal clips, so two charts can
// never clip each other wrongly.
std::string ClipId(const Frame& f) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (double v : {f.left, f.top, f.right, f.bottom}) {
    for (char c : Num(v)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  return absl::StrFormat("plot-clip-%016x", h);
}

// The legend's rows: each row is a list of (series index, x offset).
std::vector<std::vector<std::pair<size_t, double>>> LegendRows(const std::vector<Series>& series,
                                                               double width) {
  std::vector<std::vector<std::pair<size_t, double>>> rows;
  double x = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].name.empty()) continue;
    const double w = 28 + kCharWidth * static_cast<double>(series[i].name.size()) + 14;
    if (rows.empty() || (x + w > width && x > 0)) {
      rows.emplace_back();
      x = 0;
    }
    rows.back().emplace_back(i, x);
    x += w;
  }
  return rows;
}

std::string SeriesColor(const Series& s, size_t index) {
  return s.color.empty() ? PaletteColor(index) : s.color;
}

// The polyline pieces of a series in pixels: a step series gets its corners, a non-finite point
// ends a piece.
std::vector<std::vector<Point>> Pieces(const Series& s, const Scale& sx, const Scale& sy) {
  std::vector<std::vector<Point>> pieces(1);
  for (size_t i = 0; i < s.points.size(); ++i) {
    const Point& p = s.points[i];
    if (!Finite(p.x) || !Finite(p.y)) {
      if (!pieces.back().empty()) pieces.emplace_back();
      continue;
    }
    pieces.back().push_back({sx(p.x), sy(p.y)});
    if (s.step && i + 1 < s.points.size() && Finite(s.points[i + 1].x)) {
      pieces.back().push_back({sx(s.points[i + 1].x), sy(p.y)});
    }
  }
  if (pieces.back().empty()) pieces.pop_back();
  return pieces;
}

std::string PointList(const std::vector<Point>& points) {
  std::vector<std::string> parts;
  parts.reserve(points.size());
  for (const Point& p : points) parts.push_back(absl::StrCat(Num(p.x), ",", Num(p.y)));
  return absl::StrJoin(parts, " ");
}

}  // namespace

double NiceStep(double lo, double hi, int max_ticks) {
  const double range = hi - lo;
  if (!Finite(range) || range <= 0) return 1;
  const double raw = range / std::max(1, max_ticks - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  if (!Finite(lo) || !Finite(hi) || lo > hi) return {};
  if (lo == hi) return {lo};
  const double step = NiceStep(lo, hi, max_ticks);
  const double first = std::ceil(lo / step - 1e-9);
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    double v = (first + i) * step;  // from the index, so rounding errors do not accumulate
    if (v > hi + step * 1e-9) break;
    if (std::abs(v) < step * 1e-9) v = 0;  // never "-0"
    ticks.push_back(v);
  }
  return ticks;
}

std::string FormatTick(double value, double step) {
  if (!Finite(value)) return "";
  if (std::abs(value) < std::abs(step) * 1e-9) return "0";
  double scale = 1;
  const char* suffix = "";
  if (std::abs(value) >= 1e6) {
    scale = 1e6;
    suffix = "M";
  } else if (std::abs(value) >= 1e4) {
    scale = 1e3;
    suffix = "k";
  }
  const double scaled_step = std::abs(step) / scale;
  int decimals = 0;
  if (scaled_step > 0 && scaled_step < 1) {
    decimals = std::min(6, static_cast<int>(std::ceil(-std::log10(scaled_step) - 1e-9)));
  }
  return absl::StrFormat("%.*f%s", decimals, value / scale, suffix);
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += c;
    }
  }
  return out;
}

const std::string& PaletteColor(size_t index) {
  static const std::array<std::string, 10>* const kPalette =
      new std::array<std::string, 10>{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return (*kPalette)[index % kPalette->size()];
}

Series& LineChart::AddSeries(std::string name, std::vector<Point> points) {
  Series& s = series.emplace_back();
  s.name = std::move(name);
  s.points = std::move(points);
  return s;
}

Marker& LineChart::AddMarker(double x, std::string label, std::string tooltip) {
  Marker& m = markers.emplace_back();
  m.x = x;
  m.label = std::move(label);
  m.tooltip = std::move(tooltip);
  return m;
}

Bar& BarChart::AddBar(std::string label, double value) {
  Bar& b = bars.emplace_back();
  b.label = std::move(label);
  b.value = value;
  return b;
}

namespace {

// The legend: per series, a short line (over a translucent band swatch for banded series) and
// its name, in the rows LegendRows laid out above the frame.
void AppendLegend(const LineChart& chart,
                  const std::vector<std::vector<std::pair<size_t, double>>>& legend, const Frame& f,
                  std::string& svg) {
  for (size_t row = 0; row < legend.size(); ++row) {
    const double y = kTopPadding + (chart.title.empty() ? 0 : kTitleHeight) +
                     kLegendRowHeight * static_cast<double>(row) + 12;
    for (const auto& [index, offset] : legend[row]) {
      const Series& s = chart.series[index];
      const std::string color = SeriesColor(s, index);
      const double x = f.left + offset;
      if (!s.band.empty()) {
        absl::StrAppendFormat(&svg,
                              "<rect x=\"%s\" y=\"%s\" width=\"22\" height=\"10\" fill=\"%s\" "
                              "fill-opacity=\"0.2\"/>\n",
                              Num(x), Num(y - 9), color);
      }
      absl::StrAppendFormat(
          &svg,
          "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"3\"%s/>\n"
          "<text x=\"%s\" y=\"%s\" fill=\"%s\">%s</text>\n",
          Num(x), Num(y - 4), Num(x + 22), Num(y - 4), color,
          s.dashed ? " stroke-dasharray=\"6 3\"" : "", Num(x + 28), Num(y), kTextColor,
          XmlEscape(s.name));
    }
  }
}

// The series' bands, then their lines and dots, inside the plot's clip path.
void AppendSeries(const std::vector<Series>& series, const Scale& sx, const Scale& sy,
                  std::string& svg) {
  // Bands first, so every line stays visible on top of every band.
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    std::vector<Point> upper, lower;
    for (const BandPoint& b : s.band) {
      if (!Finite(b.x) || !Finite(b.low) || !Finite(b.high)) continue;
      upper.push_back({sx(b.x), sy(b.high)});
      lower.push_back({sx(b.x), sy(b.low)});
    }
    if (upper.empty()) continue;
    upper.insert(upper.end(), lower.rbegin(), lower.rend());
    absl::StrAppendFormat(&svg,
                          "<polygon points=\"%s\" fill=\"%s\" fill-opacity=\"0.2\" "
                          "stroke=\"none\"/>\n",
                          PointList(upper), SeriesColor(s, i));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string color = SeriesColor(s, i);
    for (const std::vector<Point>& piece : Pieces(s, sx, sy)) {
      absl::StrAppendFormat(&svg,
                            "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"2\" stroke-linejoin=\"round\"%s/>\n",
                            PointList(piece), color, s.dashed ? " stroke-dasharray=\"6 3\"" : "");
    }
    if (!s.dots) continue;
    for (const Point& p : s.points) {
      if (!Finite(p.x) || !Finite(p.y)) continue;
      absl::StrAppendFormat(&svg, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"/>\n",
                            Num(sx(p.x)), Num(sy(p.y)), color);
    }
  }
}

// The vertical event markers with their labels.
void AppendMarkers(const std::vector<Marker>& markers, const Scale& sx, const Frame& f,
                   std::string& svg) {
  // Markers: labels staggered over three heights so nearby events stay legible.
  for (size_t i = 0; i < markers.size(); ++i) {
    const Marker& m = markers[i];
    if (!Finite(m.x)) continue;
    const double x = sx(m.x);
    if (x < f.left - 0.5 || x > f.right + 0.5) continue;
    const std::string color = m.color.empty() ? kMarkerColor : m.color;
    const bool right_side = x < f.left + f.width() * 0.75;
    absl::StrAppendFormat(
        &svg,
        "<g><title>%s</title><line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" "
        "stroke-dasharray=\"4 3\"/>\n<text x=\"%s\" y=\"%s\" font-size=\"10\" "
        "text-anchor=\"%s\" fill=\"%s\">%s</text></g>\n",
        XmlEscape(m.tooltip.empty() ? m.label : m.tooltip), Num(x), Num(f.top), Num(x),
        Num(f.bottom), color, Num(right_side ? x + 3 : x - 3),
        Num(f.top + 11 + 12 * static_cast<double>(i % 3)), right_side ? "start" : "end", color,
        XmlEscape(m.label));
  }
}

}  // namespace

std::string RenderLineChart(const LineChart& chart) {
  // Data ranges over everything drawn.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double xlo = kInf, xhi = -kInf, ylo = kInf, yhi = -kInf;
  bool any = false;
  auto add = [&](double x, double y) {
    if (!Finite(x) || !Finite(y)) return;
    any = true;
    xlo = std::min(xlo, x);
    xhi = std::max(xhi, x);
    ylo = std::min(ylo, y);
    yhi = std::max(yhi, y);
  };
  for (const Series& s : chart.series) {
    for (const Point& p : s.points) add(p.x, p.y);
    for (const BandPoint& b : s.band) {
      add(b.x, b.low);
      add(b.x, b.high);
    }
  }
  for (const Marker& m : chart.markers) {
    if (!Finite(m.x)) continue;
    xlo = std::min(xlo, m.x);
    xhi = std::max(xhi, m.x);
  }

  const double plot_width = chart.width - kMarginLeft - kMarginRight;
  const auto legend = LegendRows(chart.series, plot_width);
  Frame f;
  f.left = kMarginLeft;
  f.right = chart.width - kMarginRight;
  f.top = kTopPadding + (chart.title.empty() ? 0 : kTitleHeight) +
          kLegendRowHeight * static_cast<double>(legend.size());
  f.bottom = chart.height - kMarginBottom;

  const int xbudget = TickBudget(f.width(), kPixelsPerXTick);
  const int ybudget = TickBudget(f.height(), kPixelsPerYTick);
  const auto [x0, x1] = AxisRange(chart.x, xlo, xhi, xbudget);
  const auto [y0, y1] = AxisRange(chart.y, ylo, yhi, ybudget);
  const Scale sx{x0, x1, f.left, f.right};
  const Scale sy{y0, y1, f.bottom, f.top};

  std::string svg = SvgOpen(chart.width, chart.height, chart.title);
  AppendLegend(chart, legend, f, svg);
  AppendAxes(f, sx, sy, AxisTicks(chart.x, x0, x1, xbudget), AxisTicks(chart.y, y0, y1, ybudget),
             chart.x.label, chart.y.label, chart.height, svg);
  if (!any) {
    AppendNoData(f, svg);
    AppendFrame(f, svg);
    return svg + "</svg>\n";
  }

  const std::string clip = ClipId(f);
  absl::StrAppendFormat(&svg,
                        "<defs><clipPath id=\"%s\"><rect x=\"%s\" y=\"%s\" width=\"%s\" "
                        "height=\"%s\"/></clipPath></defs>\n<g clip-path=\"url(#%s)\">\n",
                        clip, Num(f.left), Num(f.top), Num(f.width()), Num(f.height()), clip);
  AppendSeries(chart.series, sx, sy, svg);
  svg += "</g>\n";
  AppendMarkers(chart.markers, sx, f, svg);
  AppendFrame(f, svg);
  return svg + "</svg>\n";
}

std::string RenderBarChart(const BarChart& chart) {
  double vlo = 0, vhi = 0;
  for (const Bar& b : chart.bars) {
    if (!Finite(b.value)) continue;
    vlo = std::min(vlo, b.value);
    vhi = std::max(vhi, b.value);
  }
  Frame f;
  f.left = kMarginLeft;
  f.right = chart.width - kMarginRight;
  f.top = kTopPadding + (chart.title.empty() ? 0 : kTitleHeight);
  f.bottom = chart.height - kMarginBottom;
  const int ybudget = TickBudget(f.height(), kPixelsPerYTick);
  Axis y_axis;
  if (vhi <= vlo) vhi = 1;  // all zero: a unit range, not a degenerate one
  y_axis.min = vlo;         // bars start at 0 (or the most negative value): no nicening below
  const auto [y0, y1] = AxisRange(y_axis, vlo, vhi, ybudget);
  const Scale sy{y0, y1, f.bottom, f.top};

  std::string svg = SvgOpen(chart.width, chart.height, chart.title);
  AppendAxes(f, Scale{0, 1, f.left, f.right}, sy, {}, AxisTicks(y_axis, y0, y1, ybudget),
             chart.x_label, chart.y_label, chart.height, svg);
  if (chart.bars.empty()) {
    AppendNoData(f, svg);
    AppendFrame(f, svg);
    return svg + "</svg>\n";
  }
  const double n = static_cast<double>(chart.bars.size());
  const double slot = f.width() / n;
  const double bar_width = std::max(1.0, slot * 0.8);
  size_t longest = 1;
  for (const Bar& b : chart.bars) longest = std::max(longest, b.label.size());
  // Label every k-th bar so labels never overlap.
  const size_t every = static_cast<size_t>(
      std::max(1.0, std::ceil((kCharWidth * static_cast<double>(longest) + 6) / slot)));
  const std::string default_color = chart.color.empty() ? PaletteColor(0) : chart.color;
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const Bar& b = chart.bars[i];
    const double v = Finite(b.value) ? b.value : 0;
    const double center = f.left + slot * (static_cast<double>(i) + 0.5);
    const double top = std::min(sy(v), sy(0)), bottom = std::max(sy(v), sy(0));
    const std::string tooltip =
        b.tooltip.empty() ? absl::StrCat(b.label, ": ", absl::StrFormat("%g", v)) : b.tooltip;
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\">"
                          "<title>%s</title></rect>\n",
                          Num(center - bar_width / 2), Num(top), Num(bar_width), Num(bottom - top),
                          b.color.empty() ? default_color : b.color, XmlEscape(tooltip));
    if (i % every == 0) {
      absl::StrAppendFormat(
          &svg, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
          Num(center), Num(f.bottom + 16), kTextColor, XmlEscape(b.label));
    }
  }
  AppendFrame(f, svg);
  return svg + "</svg>\n";
}

}  // namespace syncopate::plot
