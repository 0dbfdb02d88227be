#include "libs/aggregation/gradient_statistics.h"

#include <algorithm>
#include <cmath>

#include "libs/isa/isa.h"
#include "libs/tensor/packed.h"

namespace syncopate::aggregation {
namespace {

int WarmupUpdates(double decay) {
  if (decay <= 0) return 1;
  return std::max(1, static_cast<int>(std::ceil(std::log(0.05) / std::log(decay))));
}

}  // namespace

GradientStatistics::GradientStatistics(double velocity_decay)
    : kernels_(AggregationKernelsFor(isa::ActiveIsaLevel())),
      decay_(std::clamp(velocity_decay, 0.0, 0.999)),
      warmup_(WarmupUpdates(decay_)),
      window_(static_cast<size_t>(std::max(warmup_, 8))) {}

void GradientStatistics::AddPush(std::span<const float> gradient, int64_t samples) {
  if (!measures() || samples <= 0) return;
  AddPush(tensor::SquaredNorm(gradient), samples);
}

void GradientStatistics::AddPush(double squared_norm, int64_t samples) {
  if (!measures() || samples <= 0) return;
  push_squared_sum_ += squared_norm;
  push_inverse_samples_sum_ += 1.0 / static_cast<double>(samples);
  ++pushes_;
}

void GradientStatistics::AddUpdate(std::span<const float> mean, int64_t samples) {
  if (!measures()) return;
  Version v;
  v.samples = static_cast<double>(samples);
  if (samples <= 0) {
    ClosePushes();
    return;
  }
  if (velocity_.size() != mean.size()) {
    velocity_.assign(mean.size(), 0.0f);
    velocity_updates_ = 0;
  }
  // One pass over the mean and the velocity for all three sums.
  const VelocitySums sums = kernels_.velocity_step(velocity_.data(), mean.data(), mean.size(),
                                                   static_cast<float>(decay_));
  if (pushes_ >= 2) {
    const double n = static_cast<double>(pushes_);
    v.push_excess = push_squared_sum_ / n - sums.mean_squared;
    v.push_coefficient = push_inverse_samples_sum_ / n - 1.0 / v.samples;
  }
  ClosePushes();
  v.velocity_change_squared = sums.velocity_change_squared;
  v.velocity_squared = sums.velocity_squared;
  if (++velocity_updates_ <= warmup_) return;
  versions_.push_back(v);
  while (versions_.size() > window_) versions_.pop_front();
}

void GradientStatistics::ClosePushes() {
  push_squared_sum_ = 0;
  push_inverse_samples_sum_ = 0;
  pushes_ = 0;
}

void GradientStatistics::Reset() {
  ClosePushes();
  velocity_.clear();
  velocity_updates_ = 0;
}

double GradientStatistics::noise_trace() const {
  double excess = 0;
  double coefficient = 0;
  for (const Version& v : versions_) {
    excess += v.push_excess;
    coefficient += v.push_coefficient;
  }
  // A ratio of sums, not a mean of ratios: numerator and denominator are each unbiased.
  return coefficient > 0 ? std::max(excess / coefficient, 0.0) : 0.0;
}

StalenessCost GradientStatistics::Current() const {
  StalenessCost cost;
  if (versions_.empty()) return cost;
  const double noise = noise_trace();
  const double n = static_cast<double>(versions_.size());
  std::vector<double> drifts;
  drifts.reserve(versions_.size());
  double velocity_sum = 0;
  for (const Version& v : versions_) {
    velocity_sum += v.velocity_squared;
    drifts.push_back(v.velocity_change_squared - noise * 2.0 / ((1.0 + decay_) * v.samples));
  }
  double drift_sum = 0;
  for (const double d : drifts) drift_sum += d;
  const double drift = drift_sum / n;
  double squares = 0;
  for (const double d : drifts) squares += (d - drift) * (d - drift);
  cost.versions = static_cast<int64_t>(versions_.size());
  cost.velocity_squared = velocity_sum / n;
  cost.velocity_drift_squared = drift;
  // Consecutive terms share a velocity, so they are correlated and this understates the error
  // somewhat; it only has to tell a measured cost from noise.
  cost.velocity_drift_squared_standard_error = n >= 2 ? std::sqrt(squares / (n - 1) / n) : 0.0;
  return cost;
}

}  // namespace syncopate::aggregation
