#include "libs/sim/step_time_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/splitmix64.h"

namespace syncopate::sim {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sim spec: ", field, " ", why));
}

absl::Status CheckIndex(absl::string_view field, int32_t index, int num_workers) {
  if (index < 0 || index >= num_workers) {
    return Bad(field,
               absl::StrCat("names worker ", index, "; the job has workers 0..", num_workers - 1));
  }
  return absl::OkStatus();
}

// Each worker's joins and deaths in time order, as lives: a worker whose first entry is a join
// is absent at the start; after that a death ends a life and a join starts the next. Anything
// else (two deaths in a row, a join while alive, two entries at one time) is a spec error, as is
// a job nobody starts.
absl::StatusOr<std::vector<std::vector<WorkerLife>>> BuildLives(const v1::SimSpec& spec,
                                                                int num_workers) {
  struct Entry {
    double seconds = 0;
    const v1::WorkerDeath* death = nullptr;  // null: a join
  };
  std::vector<std::vector<Entry>> entries(static_cast<size_t>(num_workers));
  for (const v1::WorkerDeath& death : spec.deaths()) {
    entries[death.worker()].push_back({death.at_seconds(), &death});
  }
  for (const v1::WorkerJoin& join : spec.joins()) {
    entries[join.worker()].push_back({join.at_seconds(), nullptr});
  }
  std::vector<std::vector<WorkerLife>> lives(static_cast<size_t>(num_workers));
  bool anyone_at_start = false;
  for (int w = 0; w < num_workers; ++w) {
    std::vector<Entry>& mine = entries[w];
    std::stable_sort(mine.begin(), mine.end(),
                     [](const Entry& a, const Entry& b) { return a.seconds < b.seconds; });
    const bool at_start = mine.empty() || mine.front().death != nullptr;
    anyone_at_start = anyone_at_start || at_start;
    if (at_start) {
      WorkerLife life;
      life.at_start = true;
      lives[w].push_back(life);
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      const bool alive = !lives[w].empty() && !lives[w].back().death.has_value();
      if (i > 0 && mine[i].seconds == mine[i - 1].seconds) {
        return Bad("joins and deaths", absl::StrCat("of worker ", w, " need distinct times"));
      }
      if (mine[i].death != nullptr) {
        if (!alive) {
          return Bad("deaths", absl::StrCat("worker ", w, " dies at ", mine[i].seconds,
                                            " s without a join since its last death"));
        }
        lives[w].back().death = *mine[i].death;
      } else {
        if (alive) {
          return Bad("joins", absl::StrCat("worker ", w, " joins at ", mine[i].seconds,
                                           " s while it is alive (a join follows a death, or "
                                           "starts a worker absent at the start)"));
        }
        WorkerLife life;
        life.join_seconds = mine[i].seconds;
        lives[w].push_back(life);
      }
    }
  }
  if (!anyone_at_start) return Bad("joins", "leave no worker there at the start");
  return lives;
}

}  // namespace

absl::StatusOr<StepTimeModel> StepTimeModel::Create(const v1::SimSpec& spec, int num_workers,
                                                    uint64_t seed) {
  if (num_workers <= 0) return Bad("workers", "must be at least one");
  const v1::StepTimeSpec& s = spec.step_time();
  if (s.seconds_per_step() < 0 || s.seconds_per_example() < 0) {
    return Bad("step_time", "seconds must not be negative");
  }
  if (s.seconds_per_step() + s.seconds_per_example() <= 0) {
    return Bad("step_time", "needs seconds_per_step or seconds_per_example > 0");
  }
  if (s.lognormal_sigma() < 0) return Bad("step_time.lognormal_sigma", "must not be negative");
  if (s.hiccup_probability() < 0 || s.hiccup_probability() > 1) {
    return Bad("step_time.hiccup_probability", "must lie in [0, 1]");
  }
  if (s.hiccup_probability() > 0 && (s.hiccup_alpha() <= 0 || s.hiccup_scale_seconds() <= 0)) {
    return Bad("step_time", "hiccups need hiccup_alpha > 0 and hiccup_scale_seconds > 0");
  }
  for (const v1::WorkerSpeed& speed : spec.speeds()) {
    if (absl::Status st = CheckIndex("speeds.worker", speed.worker(), num_workers); !st.ok()) {
      return st;
    }
    if (!(speed.factor() > 0)) return Bad("speeds.factor", "must be positive");
  }
  for (const v1::TransientSlowdown& slow : spec.slowdowns()) {
    for (int32_t w : slow.workers()) {
      if (absl::Status st = CheckIndex("slowdowns.workers", w, num_workers); !st.ok()) return st;
    }
    if (!(slow.factor() > 0)) return Bad("slowdowns.factor", "must be positive");
    if (slow.start_seconds() < 0 || slow.end_seconds() < 0 ||
        (slow.end_seconds() > 0 && slow.end_seconds() <= slow.start_seconds())) {
      return Bad("slowdowns", "needs 0 <= start_seconds < end_seconds (or end_seconds 0)");
    }
  }
  for (const v1::WorkerDeath& death : spec.deaths()) {
    if (absl::Status st = CheckIndex("deaths.worker", death.worker(), num_workers); !st.ok()) {
      return st;
    }
    if (death.at_seconds() < 0 || death.detected_after_seconds() < 0) {
      return Bad("deaths", "times must not be negative");
    }
  }
  for (const v1::WorkerJoin& join : spec.joins()) {
    if (absl::Status st = CheckIndex("joins.worker", join.worker(), num_workers); !st.ok()) {
      return st;
    }
    if (!(join.at_seconds() >= 0)) return Bad("joins.at_seconds", "must not be negative");
  }
  absl::StatusOr<std::vector<std::vector<WorkerLife>>> lives = BuildLives(spec, num_workers);
  if (!lives.ok()) return lives.status();
  const v1::NetworkSpec& net = spec.network();
  if (net.latency_seconds() < 0 || net.bandwidth_bytes_per_second() < 0) {
    return Bad("network", "must not be negative");
  }
  if (spec.shard().seconds_per_message() < 0 || spec.shard().bytes_per_second() < 0) {
    return Bad("shard", "must not be negative");
  }
  if (spec.shard().stream_threads() && !(spec.cpu().cores() > 0)) {
    // Without the CPU model nothing would bound how many streams a shard serves at once.
    return Bad("shard.stream_threads", "needs cpu.cores > 0 (the threads share the cores)");
  }
  if (spec.max_virtual_seconds() < 0) return Bad("max_virtual_seconds", "must not be negative");
  if (!(spec.cpu().cores() >= 0) || !(spec.cpu().compute_padding() >= 0)) {
    return Bad("cpu", "cores and compute_padding must not be negative");
  }
  if (spec.cpu().compute_padding() > 0 && spec.cpu().compute_padding() < 1) {
    return Bad("cpu.compute_padding", "must be 0 (none) or at least 1");
  }
  if (!(spec.startup_seconds() >= 0) || !(spec.evaluation_seconds() >= 0)) {
    return Bad("startup_seconds and evaluation_seconds", "must not be negative");
  }
  return StepTimeModel(spec, num_workers, seed, *std::move(lives));
}

StepTimeModel::StepTimeModel(const v1::SimSpec& spec, int num_workers, uint64_t seed,
                             std::vector<std::vector<WorkerLife>> lives)
    : spec_(spec), speed_(static_cast<size_t>(num_workers), 1.0), lives_(std::move(lives)) {
  for (const v1::WorkerSpeed& speed : spec.speeds()) speed_[speed.worker()] *= speed.factor();
  streams_.reserve(speed_.size());
  for (int w = 0; w < num_workers; ++w) {
    streams_.emplace_back(SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(w)));
  }
}

double StepTimeModel::Uniform(int index) {
  // (k + 0.5) / 2^53 for a 53-bit k: never 0 or 1, so log() below stays finite.
  const uint64_t k = streams_[index]() >> 11;
  return (static_cast<double>(k) + 0.5) * 0x1.0p-53;
}

double StepTimeModel::StandardNormal(int index) {
  // Box-Muller with a fresh pair per draw: simple, and the draw count per step stays fixed.
  const double u1 = Uniform(index);
  const double u2 = Uniform(index);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double StepTimeModel::Slowdown(int index, double now_seconds) const {
  double factor = speed_[index];
  for (const v1::TransientSlowdown& slow : spec_.slowdowns()) {
    if (now_seconds < slow.start_seconds()) continue;
    if (slow.end_seconds() > 0 && now_seconds >= slow.end_seconds()) continue;
    for (int32_t w : slow.workers()) {
      if (w == index) factor *= slow.factor();
    }
  }
  return factor;
}

StepCompute StepTimeModel::Compute(int index, int64_t examples, double now_seconds) {
  const v1::StepTimeSpec& s = spec_.step_time();
  double seconds =
      (s.seconds_per_step() + static_cast<double>(examples) * s.seconds_per_example()) *
      Slowdown(index, now_seconds);
  // Every draw happens whether or not its term is on, so a spec change never shifts the stream.
  const double z = StandardNormal(index);
  const double hiccup_draw = Uniform(index);
  const double pareto_draw = Uniform(index);
  const double sigma = s.lognormal_sigma();
  // exp(sigma Z - sigma^2/2) has mean 1: the noise changes the spread, not the mean.
  seconds *= std::exp(sigma * z - sigma * sigma / 2);
  StepCompute step;
  if (hiccup_draw < s.hiccup_probability()) {
    // Pareto by inverse CDF: x_m * u^(-1/alpha), u uniform in (0, 1).
    step.hiccup_seconds = s.hiccup_scale_seconds() * std::pow(pareto_draw, -1.0 / s.hiccup_alpha());
    seconds += step.hiccup_seconds;
  }
  step.seconds = seconds;
  return step;
}

double StepTimeModel::MessageTransferSeconds(int64_t bytes) const {
  const v1::NetworkSpec& net = spec_.network();
  if (!(net.bandwidth_bytes_per_second() > 0)) return 0;
  return static_cast<double>(bytes) / net.bandwidth_bytes_per_second();
}

double StepTimeModel::ShardServiceSeconds(int64_t bytes) const {
  const v1::ShardTimingSpec& shard = spec_.shard();
  double seconds = shard.seconds_per_message();
  if (shard.bytes_per_second() > 0) {
    seconds += static_cast<double>(bytes) / shard.bytes_per_second();
  }
  return seconds;
}

}  // namespace syncopate::sim
