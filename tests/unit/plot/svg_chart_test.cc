#include "libs/plot/svg_chart.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::plot {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pointwise;

// A small well-formedness check for the XML subset the charts emit: every tag closes in order,
// attribute values are quoted, and '&' only starts one of the five entities we write.
bool WellFormed(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      bool known = false;
      for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"}) {
        known = known || xml.compare(i, std::string(e).size(), e) == 0;
      }
      if (!known) {
        *why = "bare & at " + std::to_string(i);
        return false;
      }
      ++i;
      continue;
    }
    if (xml[i] == '>') {
      *why = "bare > at " + std::to_string(i);
      return false;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    // A tag: find its end, skipping quoted attribute values (which must not contain '<').
    size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote != 0) {
        if (xml[j] == '<') {
          *why = "< inside an attribute at " + std::to_string(j);
          return false;
        }
        if (xml[j] == quote) quote = 0;
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) {
      *why = "unterminated tag";
      return false;
    }
    const std::string tag = xml.substr(i + 1, j - i - 1);
    if (tag[0] == '/') {
      const std::string closing = tag.substr(1);
      if (open.empty() || open.back() != closing) {
        *why = "</" + closing + "> does not close " + (open.empty() ? "anything" : open.back());
        return false;
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = j + 1;
  }
  if (!open.empty()) {
    *why = "<" + open.back() + "> never closed";
    return false;
  }
  return true;
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(XmlEscape, EscapesMarkupAndDropsForbiddenControlCharacters) {
  EXPECT_EQ(XmlEscape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  EXPECT_EQ(XmlEscape(std::string("x\x01y\tz\n", 6)), "xy\tz\n");
  EXPECT_EQ(XmlEscape("plain µs"), "plain µs") << "UTF-8 passes through";
}

TEST(NiceTicks, UsesOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_THAT(NiceTicks(0, 10, 6), ElementsAre(0, 2, 4, 6, 8, 10));
  EXPECT_THAT(NiceTicks(0, 1, 6),
              Pointwise(DoubleNear(1e-12), std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  // 0.83..0.87 over at most 5 ticks: a step of 0.01 (0.04 / 4 = 0.01).
  EXPECT_EQ(NiceTicks(0.83, 0.87, 5).size(), 5u);
  EXPECT_DOUBLE_EQ(NiceStep(0.83, 0.87, 5), 0.01);
  // 0..47 over at most 6: 47 / 5 = 9.4 rounds up to 10.
  EXPECT_THAT(NiceTicks(0, 47, 6), ElementsAre(0, 10, 20, 30, 40));
  EXPECT_THAT(NiceTicks(-3, 3, 4), ElementsAre(-2, 0, 2));
  EXPECT_THAT(NiceTicks(5, 5, 6), ElementsAre(5));
  EXPECT_TRUE(NiceTicks(1, 0, 6).empty());
  EXPECT_TRUE(NiceTicks(0, std::numeric_limits<double>::infinity(), 6).empty());
}

TEST(NiceTicks, NeverPrintsNegativeZero) {
  for (double v : NiceTicks(-0.3, 0.3, 7)) EXPECT_NE(FormatTick(v, 0.1), "-0.0");
  EXPECT_EQ(FormatTick(-1e-17, 0.1), "0");
}

TEST(FormatTick, DecimalsFollowTheStepAndLargeNumbersGetSuffixes) {
  EXPECT_EQ(FormatTick(0.25, 0.05), "0.25");
  EXPECT_EQ(FormatTick(0.4, 0.2), "0.4");
  EXPECT_EQ(FormatTick(30, 10), "30");
  EXPECT_EQ(FormatTick(1500, 500), "1500");
  EXPECT_EQ(FormatTick(20000, 10000), "20k");
  EXPECT_EQ(FormatTick(1500000, 500000), "1.5M");
  EXPECT_EQ(FormatTick(2000000, 1000000), "2M");
}

LineChart TwoSeries() {
  LineChart chart;
  chart.title = "Accuracy <&> \"test\"";
  chart.x.label = "wall time (s)";
  chart.y.label = "accuracy";
  chart.AddSeries("sync", {{0, 0.1}, {10, 0.5}, {20, 0.8}});
  Series& gba = chart.AddSeries("gba", {{0, 0.1}, {8, 0.6}});
  gba.color = "#123456";
  gba.dashed = true;
  return chart;
}

TEST(LineChart, IsWellFormedAndEscapesText) {
  LineChart chart = TwoSeries();
  chart.AddMarker(5, "sync -> gba", "reason <x> & 'y'");
  const std::string svg = RenderLineChart(chart);
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why << "\n" << svg;
  EXPECT_TRUE(absl::StartsWith(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("Accuracy &lt;&amp;&gt; &quot;test&quot;"));
  EXPECT_THAT(svg, HasSubstr("sync -&gt; gba"));
  EXPECT_THAT(svg, HasSubstr("reason &lt;x&gt; &amp; &#39;y&#39;"));
  EXPECT_THAT(svg, Not(HasSubstr("<script"))) << "no scripts, ever";
  EXPECT_THAT(svg, Not(HasSubstr("href"))) << "no external references";
}

TEST(LineChart, DrawsEachSeriesInItsColourWithALegend) {
  const std::string svg = RenderLineChart(TwoSeries());
  // Default colour from the palette for the first series, the given one for the second.
  EXPECT_THAT(svg, HasSubstr("stroke=\"" + PaletteColor(0) + "\" stroke-width=\"2\""));
  EXPECT_THAT(svg, HasSubstr("stroke=\"#123456\" stroke-width=\"2\""));
  EXPECT_THAT(svg, HasSubstr(">sync</text>"));
  EXPECT_THAT(svg, HasSubstr(">gba</text>"));
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_EQ(Count(svg, "stroke-dasharray=\"6 3\""), 2) << "the dashed series and its legend";
  // x spans 0..20 over the 556 px between the margins: (0,0.1) is at the left edge and (20,0.8)
  // at the right one; y 0.1..0.8 widens to whole ticks 0..0.8 over the plot's height.
  EXPECT_THAT(svg, HasSubstr("points=\"64.0,"));
  EXPECT_THAT(svg, HasSubstr(" 620.0,"));
}

TEST(LineChart, IsDeterministic) {
  EXPECT_EQ(RenderLineChart(TwoSeries()), RenderLineChart(TwoSeries()));
}

TEST(LineChart, StepSeriesHoldsEachValueUntilTheNextPoint) {
  LineChart chart;
  chart.width = 164 + 20;  // 100 px of plot between the margins (64 left, 20 right)
  chart.x.min = 0;
  chart.x.max = 10;
  chart.y.categories = {{0, "sync"}, {1, "gba"}};
  chart.AddSeries("", {{0, 0}, {4, 1}, {10, 1}}).step = true;
  const std::string svg = RenderLineChart(chart);
  // Corners at x = 4 (104 px) on both levels: (0,sync) (4,sync) (4,gba) (10,gba) (10,gba).
  const size_t at = svg.find("<polyline points=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string points = svg.substr(at + 18, svg.find('"', at + 18) - (at + 18));
  const std::vector<std::string> parts = absl::StrSplit(points, ' ');
  ASSERT_EQ(parts.size(), 5u) << points;
  EXPECT_TRUE(absl::StartsWith(parts[1], "104.0,")) << points;
  EXPECT_TRUE(absl::StartsWith(parts[2], "104.0,")) << points;
  EXPECT_EQ(parts[0].substr(parts[0].find(',')), parts[1].substr(parts[1].find(',')));
  EXPECT_EQ(parts[2].substr(parts[2].find(',')), parts[3].substr(parts[3].find(',')));
  // Category names replace the numeric ticks.
  EXPECT_THAT(svg, HasSubstr(">sync</text>"));
  EXPECT_THAT(svg, HasSubstr(">gba</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">0.5</text>")));
}

TEST(LineChart, NonFinitePointsBreakTheLine) {
  LineChart chart;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  chart.AddSeries("", {{0, 1}, {1, 2}, {2, nan}, {3, 1}, {4, 2}});
  const std::string svg = RenderLineChart(chart);
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
}

TEST(LineChart, BandIsATranslucentPolygonUnderTheLine) {
  LineChart chart;
  chart.AddSeries("auto", {{0, 0.5}, {1, 0.6}, {2, 0.7}}).band = {
      {0, 0.4, 0.6}, {1, 0.5, 0.7}, {2, 0.65, 0.75}};
  const std::string svg = RenderLineChart(chart);
  ASSERT_EQ(Count(svg, "<polygon"), 1);
  EXPECT_LT(svg.find("<polygon"), svg.find("<polyline")) << "band under the line";
  EXPECT_THAT(svg, HasSubstr("fill=\"" + PaletteColor(0) + "\" fill-opacity=\"0.2\""));
  // Upper edge forwards then lower edge backwards: 6 vertices.
  const size_t at = svg.find("<polygon points=\"") + 17;
  const std::string points = svg.substr(at, svg.find('"', at) - at);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(points, ' ')).size(), 6u);
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
}

TEST(LineChart, ExplicitRangeClipsTheCurves) {
  LineChart chart = TwoSeries();
  chart.y.min = 0.5;
  chart.y.max = 0.7;
  const std::string svg = RenderLineChart(chart);
  EXPECT_THAT(svg, HasSubstr("<clipPath id=\"plot-clip-"));
  EXPECT_THAT(svg, HasSubstr("clip-path=\"url(#plot-clip-"));
  // Ticks stay inside the given range.
  EXPECT_THAT(svg, HasSubstr(">0.60</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">0.80</text>")));
}

TEST(LineChart, MarkersAreLabelledVerticalLines) {
  LineChart chart = TwoSeries();
  chart.AddMarker(10, "to gba").color = "#aa0000";
  const std::string svg = RenderLineChart(chart);
  EXPECT_THAT(svg, HasSubstr("stroke=\"#aa0000\" stroke-dasharray=\"4 3\""));
  EXPECT_THAT(svg, HasSubstr(">to gba</text>"));
  EXPECT_THAT(svg, HasSubstr("<title>to gba</title>")) << "the label is the default tooltip";
}

TEST(LineChart, WithoutDataRendersAFrameAndSaysSo) {
  LineChart chart;
  chart.title = "empty";
  chart.AddSeries("nothing", {});
  const std::string svg = RenderLineChart(chart);
  EXPECT_THAT(svg, HasSubstr(">no data</text>"));
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
}

TEST(LineChart, LongLegendsWrapIntoRows) {
  LineChart chart;
  chart.title = "Accuracy";
  for (int i = 0; i < 12; ++i) {
    chart.AddSeries("worker-" + std::to_string(i), {{0, 1}, {1, static_cast<double>(i)}});
  }
  const std::string one_row = RenderLineChart(TwoSeries());
  const std::string svg = RenderLineChart(chart);
  // 12 entries of ~100 px do not fit in 556 px: the plot starts lower than with one row.
  auto plot_top = [](const std::string& s) {
    const size_t at = s.find("<rect x=\"64.0\" y=\"") + 18;
    return std::stod(s.substr(at, s.find('"', at) - at));
  };
  EXPECT_GE(plot_top(svg), plot_top(one_row) + 18);
  EXPECT_THAT(svg, HasSubstr(">worker-11</text>"));
}

TEST(BarChart, BarsStartAtZeroAndCarryTooltips) {
  BarChart chart;
  chart.title = "Staleness";
  chart.x_label = "versions";
  chart.AddBar("0", 30);
  chart.AddBar("1", 10);
  chart.AddBar("2+", 0);
  const std::string svg = RenderBarChart(chart);
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "<rect x="), 3 + 1) << "three bars and the frame";
  EXPECT_THAT(svg, HasSubstr("<title>0: 30</title>"));
  EXPECT_THAT(svg, HasSubstr("<title>2+: 0</title>"));
  EXPECT_THAT(svg, HasSubstr(">2+</text>"));
  // The y axis starts at 0: a "0" tick exists.
  EXPECT_THAT(svg, HasSubstr(">0</text>"));
}

TEST(BarChart, ThinsLabelsOfNarrowBars) {
  BarChart chart;
  for (int i = 0; i < 200; ++i) chart.AddBar(std::to_string(1000 + i), 1);
  const std::string svg = RenderBarChart(chart);
  // 200 bars in 556 px (2.8 px each) with 4-character labels (~32 px): every 12th is labelled.
  EXPECT_THAT(svg, HasSubstr(">1000</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">1001</text>")));
  EXPECT_LT(Count(svg, "text-anchor=\"middle\""), 30);
}

TEST(BarChart, EmptyRendersNoData) {
  EXPECT_THAT(RenderBarChart(BarChart{}), HasSubstr(">no data</text>"));
}

}  // namespace
}  // namespace syncopate::plot
