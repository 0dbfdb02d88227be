// report.html as a person sees it: a report of a known run is rendered by headless Chromium
// (Debian's `chromium`, which ./dev installs) and the screenshot is checked pixel by pixel: every
// chart is on the page, and its curves and bars are where the run's numbers put them.
#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): mkdtemp is POSIX, not in <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "libs/plot/svg_chart.h"
#include "libs/report/run_report.h"
#include "zlib.h"

namespace syncopate::report {
namespace {

constexpr char kChromium[] = "/usr/bin/chromium";
// Wide enough for two 640 px charts side by side, tall enough for the whole page.
constexpr int kWindowWidth = 1400;
constexpr int kWindowHeight = 2400;

struct Rgb {
  int r = 0, g = 0, b = 0;
};

Rgb ParseColor(const std::string& hex) {  // "#rrggbb"
  return {std::stoi(hex.substr(1, 2), nullptr, 16), std::stoi(hex.substr(3, 2), nullptr, 16),
          std::stoi(hex.substr(5, 2), nullptr, 16)};
}

// An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), decoded with zlib.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<Rgb> pixels;
  const Rgb& at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

uint32_t BigEndian(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

bool DecodePng(const std::string& file, Image& image, std::string& why) {
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    why = "not a PNG";
    return false;
  }
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 8 <= file.size();) {
    const uint32_t length = BigEndian(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (at + 12 + length > file.size()) break;
    if (type == "IHDR") {
      image.width = static_cast<int>(BigEndian(file, at + 8));
      image.height = static_cast<int>(BigEndian(file, at + 12));
      const int depth = static_cast<uint8_t>(file[at + 16]);
      const int color_type = static_cast<uint8_t>(file[at + 17]);
      const int interlace = static_cast<uint8_t>(file[at + 20]);
      channels = color_type == 2 ? 3 : color_type == 6 ? 4 : 0;
      if (depth != 8 || channels == 0 || interlace != 0) {
        why = absl::StrFormat("unsupported PNG: depth %d, colour type %d, interlace %d", depth,
                              color_type, interlace);
        return false;
      }
    } else if (type == "IDAT") {
      idat += file.substr(at + 8, length);
    }
    at += 12 + length;
  }
  const size_t stride = static_cast<size_t>(image.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * image.height);
  uLongf raw_size = raw.size();
  if (channels == 0 ||
      uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_size != raw.size()) {
    why = "cannot inflate the image data";
    return false;
  }
  // Undo the per-row filters (PNG specification, section 9).
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  image.pixels.resize(static_cast<size_t>(image.width) * image.height);
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* row = &raw[y * (stride + 1)];
    const int filter = row[0];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0;
      const int b = prev[i];
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int predictor = 0;
      switch (filter) {
        case 1:
          predictor = a;
          break;
        case 2:
          predictor = b;
          break;
        case 3:
          predictor = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          break;
      }
      cur[i] = static_cast<uint8_t>(row[1 + i] + predictor);
    }
    for (int x = 0; x < image.width; ++x) {
      const size_t at = static_cast<size_t>(x) * channels;
      image.pixels[static_cast<size_t>(y) * image.width + x] = {cur[at], cur[at + 1], cur[at + 2]};
    }
    std::swap(prev, cur);
  }
  return true;
}

// A chart's plot frame in the screenshot: the 1 px #888888 rectangle libs/plot draws crisply.
struct Frame {
  int left = 0, top = 0, right = 0, bottom = 0;
};

std::vector<Frame> FindFrames(const Image& image) {
  const Rgb frame = ParseColor("#888888");
  struct Run {
    int y, x0, x1;
  };
  std::vector<Run> runs;  // horizontal runs of the frame colour at least 300 px long
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width;) {
      int end = x;
      while (end < image.width && image.at(end, y).r == frame.r && image.at(end, y).g == frame.g &&
             image.at(end, y).b == frame.b) {
        ++end;
      }
      if (end - x >= 300) runs.push_back({y, x, end - 1});
      x = end + 1;
    }
  }
  // A frame is a top run and the next run below it with the same extent and a left edge
  // joining them.
  std::vector<Frame> frames;
  std::vector<bool> used(runs.size(), false);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (used[i]) continue;
    for (size_t j = i + 1; j < runs.size(); ++j) {
      if (used[j] || runs[j].x0 != runs[i].x0 || runs[j].x1 != runs[i].x1) continue;
      if (runs[j].y - runs[i].y < 50) break;
      bool edge = true;
      for (int y = runs[i].y; y <= runs[j].y && edge; ++y) {
        const Rgb& p = image.at(runs[i].x0, y);
        edge = p.r == frame.r && p.g == frame.g && p.b == frame.b;
      }
      if (!edge) continue;
      frames.push_back({runs[i].x0, runs[i].y, runs[i].x1, runs[j].y});
      used[i] = used[j] = true;
      break;
    }
  }
  // Reading order. Charts side by side share their bottom edge (a legend moves only the top).
  std::sort(frames.begin(), frames.end(), [](const Frame& a, const Frame& b) {
    return a.bottom != b.bottom ? a.bottom < b.bottom : a.left < b.left;
  });
  return frames;
}

// Pixels of `color` (within antialiasing tolerance) inside the frame, with x in the given
// fraction [from, to) of the frame's width.
struct Pixels {
  int count = 0;
  double mean_y = 0;  // screen rows grow downwards: a higher value is drawn higher up when smaller
};

Pixels Find(const Image& image, const Frame& f, const std::string& color, double from = 0,
            double to = 1) {
  const Rgb c = ParseColor(color);
  Pixels out;
  const int x0 = f.left + 2 + static_cast<int>(from * (f.right - f.left - 4));
  const int x1 = f.left + 2 + static_cast<int>(to * (f.right - f.left - 4));
  double sum = 0;
  for (int y = f.top + 2; y < f.bottom - 1; ++y) {
    for (int x = x0; x < x1; ++x) {
      const Rgb& p = image.at(x, y);
      if (std::abs(p.r - c.r) <= 24 && std::abs(p.g - c.g) <= 24 && std::abs(p.b - c.b) <= 24) {
        ++out.count;
        sum += y;
      }
    }
  }
  out.mean_y = out.count > 0 ? sum / out.count : 0;
  return out;
}

// A run of 40 s: accuracy rises 30% -> 88% and loss falls, three workers of which one is four
// times slower, two shards that switch from sync to gba at 15 s and 16 s, and a staleness
// histogram that falls off with staleness.
v1::RunReport KnownRun() {
  v1::RunReport r;
  r.set_job_id("render <test> & \"quotes\"");
  r.set_mode("auto");
  r.set_state(v1::JOB_DONE);
  r.set_quality_metric("accuracy");
  r.set_wall_seconds(42);
  r.set_training_seconds(40);
  r.set_examples(108000);
  r.set_examples_per_second(2700);
  r.set_global_batch(256);
  r.set_final_accuracy(0.88);
  r.set_final_loss(0.35);
  r.set_final_auc(0.98);
  for (int t = 0; t <= 40; t += 5) {
    v1::EvalStatus* e = r.add_eval_history();
    e->set_seconds_at_eval(t);
    e->set_examples_at_eval(int64_t{2700} * t);
    e->set_accuracy(0.88 - 0.58 * std::exp(-t / 8.0));
    e->set_loss(0.35 + 1.5 * std::exp(-t / 8.0));
  }
  const double rates[] = {1200, 1000, 300};
  for (int w = 0; w < 3; ++w) {
    v1::RunReport::Worker* worker = r.add_workers();
    worker->set_name(absl::StrCat("worker-", w));
    worker->set_examples(static_cast<int64_t>(rates[w] * 40));
    worker->set_slowdown(w == 2 ? 4 : 1);
    worker->set_alive_at_end(true);
  }
  for (int t = 0; t <= 40; ++t) {
    v1::RunReport::Sample* s = r.add_timeline();
    s->set_seconds(t);
    s->set_examples(int64_t{2700} * t);
    for (int w = 0; w < 3; ++w) {
      v1::RunReport::Sample::Worker* worker = s->add_workers();
      worker->set_name(absl::StrCat("worker-", w));
      worker->set_examples(static_cast<int64_t>(rates[w] * t));
      worker->set_loss(static_cast<float>(0.3 + 1.6 * std::exp(-t / 8.0)));
      worker->set_alive(true);
    }
  }
  for (int id = 0; id < 2; ++id) {
    v1::RunReport::Shard* shard = r.add_shards();
    shard->set_shard(id);
    shard->set_mode("gba");
    v1::ModeDecisionStatus* d = shard->add_switches();
    d->set_seconds(15 + id);
    d->set_current(v1::MODE_SYNC);
    d->set_recommended(v1::MODE_GBA);
    d->set_reason("straggler_detected");
    d->set_explanation("worker-2 is 4.0x slower <z 9.1>");
    int64_t count = 4000;
    for (auto [lo, hi] : std::vector<std::pair<int, int>>{
             {0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 6}, {7, 8}, {9, -1}}) {
      v1::StalenessBucket* b = shard->add_staleness();
      b->set_min_staleness(lo);
      b->set_max_staleness(hi);
      b->set_count(count);
      count /= 4;
    }
  }
  return r;
}

class ReportHtmlRender : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/report_html_render_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Renders `html` and decodes the screenshot.
  void Render(const std::string& html, Image& image) {
    ASSERT_EQ(access(kChromium, X_OK), 0)
        << kChromium << " is missing: ./dev setup installs it (apt-get install chromium)";
    std::ofstream(dir_ + "/report.html") << html;
    // --user-data-dir keeps Chromium's profile out of $HOME; the network switches keep it from
    // trying to reach anything on this closed network (../shared/TOOLING.md).
    const std::string command = absl::StrFormat(
        "timeout 60 %s --headless --no-sandbox --disable-gpu --hide-scrollbars "
        "--disable-background-networking --disable-component-update --disable-sync "
        "--no-first-run --force-device-scale-factor=1 --user-data-dir=%s/profile "
        "--window-size=%d,%d --screenshot=%s/shot.png file://%s/report.html >%s/chromium.log 2>&1",
        kChromium, dir_, kWindowWidth, kWindowHeight, dir_, dir_, dir_);
    ASSERT_EQ(std::system(command.c_str()), 0)
        << "chromium failed; see " << dir_ << "/chromium.log";
    std::ifstream in(dir_ + "/shot.png", std::ios::binary);
    std::stringstream png;
    png << in.rdbuf();
    std::string why;
    ASSERT_TRUE(DecodePng(png.str(), image, why)) << why << " (" << dir_ << "/shot.png)";
    ASSERT_EQ(image.width, kWindowWidth);
  }

  std::string dir_;
};

TEST_F(ReportHtmlRender, EveryChartShowsTheRunWhereItsNumbersSay) {
  Image image;
  ASSERT_NO_FATAL_FAILURE(Render(RunReportHtml(KnownRun()), image));
  const std::vector<Frame> frames = FindFrames(image);
  // Two per row: accuracy and loss vs time, the same vs samples, modes and staleness,
  // throughput over time and per worker.
  ASSERT_EQ(frames.size(), 8u) << "screenshot in " << dir_;
  const std::string blue = plot::PaletteColor(0), orange = plot::PaletteColor(1),
                    green = plot::PaletteColor(2);
  for (int i : {0, 2}) {  // accuracy vs time, vs samples: rises from left to right
    SCOPED_TRACE(absl::StrCat("accuracy chart ", i));
    const Pixels left = Find(image, frames[i], blue, 0, 0.25);
    const Pixels right = Find(image, frames[i], blue, 0.75, 1);
    ASSERT_GT(left.count, 20);
    ASSERT_GT(right.count, 20);
    EXPECT_GT(left.mean_y, right.mean_y + 40) << "the accuracy curve must rise";
  }
  for (int i : {1, 3}) {  // loss vs time, vs samples: test loss falls, training loss drawn
    SCOPED_TRACE(absl::StrCat("loss chart ", i));
    const Pixels left = Find(image, frames[i], blue, 0, 0.25);
    const Pixels right = Find(image, frames[i], blue, 0.75, 1);
    ASSERT_GT(left.count, 20);
    ASSERT_GT(right.count, 20);
    EXPECT_LT(left.mean_y, right.mean_y - 40) << "the loss curve must fall";
    EXPECT_GT(Find(image, frames[i], orange).count, 100) << "the training loss";
  }
  {
    SCOPED_TRACE("mode timeline");
    // Switches at 15 and 16 s of 40: both shards sit on the sync level before (lower) and on
    // the gba level after (higher); the nice x axis runs to 40 s.
    for (const std::string& shard : {blue, orange}) {
      const Pixels before = Find(image, frames[4], shard, 0, 0.3);
      const Pixels after = Find(image, frames[4], shard, 0.5, 1);
      ASSERT_GT(before.count, 50);
      ASSERT_GT(after.count, 50);
      EXPECT_GT(before.mean_y, after.mean_y + 40) << shard;
    }
  }
  {
    SCOPED_TRACE("staleness histogram");
    // 8 bars, counts falling 4x per bar: the first eighth holds most of the bar colour.
    const Pixels first = Find(image, frames[5], blue, 0, 1.0 / 8);
    const Pixels rest = Find(image, frames[5], blue, 2.0 / 8, 1);
    EXPECT_GT(first.count, 1000);
    EXPECT_GT(first.count, 2 * rest.count);
  }
  {
    SCOPED_TRACE("throughput per worker over time");
    const Pixels fast = Find(image, frames[6], blue);
    const Pixels slow = Find(image, frames[6], green);
    ASSERT_GT(fast.count, 100);
    ASSERT_GT(slow.count, 100);
    EXPECT_GT(slow.mean_y, fast.mean_y + 40) << "the slow worker's line is lower";
  }
  {
    SCOPED_TRACE("mean throughput per worker");
    const int fast = Find(image, frames[7], blue).count;
    const int slow = Find(image, frames[7], green).count;
    EXPECT_GT(fast, 1000);
    EXPECT_GT(slow, 0);
    EXPECT_LT(slow, fast / 2) << "the slow worker's bar is a quarter as tall";
  }
}

// The check can fail: a page whose charts lost their data shows frames without curves.
TEST_F(ReportHtmlRender, AReportWithoutDataHasNoCurves) {
  v1::RunReport empty = KnownRun();
  empty.clear_eval_history();
  empty.clear_timeline();
  Image image;
  ASSERT_NO_FATAL_FAILURE(Render(RunReportHtml(empty), image));
  const std::vector<Frame> frames = FindFrames(image);
  ASSERT_EQ(frames.size(), 8u);
  EXPECT_EQ(Find(image, frames[0], plot::PaletteColor(0)).count, 0);
  EXPECT_EQ(Find(image, frames[1], plot::PaletteColor(1)).count, 0);
}

}  // namespace
}  // namespace syncopate::report
