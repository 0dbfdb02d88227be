#include "libs/aggregation/gradient_statistics.h"

#include <algorithm>
#include <cmath>

namespace syncopate::aggregation {
namespace {

int WarmupUpdates(double decay) {
  if (decay <= 0) return 1;
  return std::max(1, static_cast<int>(std::ceil(std::log(0.05) / std::log(decay))));
}

}  // namespace

GradientStatistics::GradientStatistics(double velocity_decay)
    : decay_(std::clamp(velocity_decay, 0.0, 0.999)),
      warmup_(WarmupUpdates(decay_)),
      window_(static_cast<size_t>(std::max(warmup_, 8))) {}

void GradientStatistics::AddPush(std::span<const float> gradient, int64_t samples) {
  if (!measures() || samples <= 0) return;
  double squared = 0;
  for (const float x : gradient) squared += static_cast<double>(x) * x;
  push_squared_sum_ += squared;
  push_inverse_samples_sum_ += 1.0 / static_cast<double>(samples);
  ++pushes_;
}

void GradientStatistics::AddUpdate(std::span<const float> mean, int64_t samples) {
  if (!measures()) return;
  Version v;
  v.samples = static_cast<double>(samples);
  double mean_squared = 0;
  for (const float x : mean) mean_squared += static_cast<double>(x) * x;
  if (pushes_ >= 2 && samples > 0) {
    const double n = static_cast<double>(pushes_);
    v.push_excess = push_squared_sum_ / n - mean_squared;
    v.push_coefficient = push_inverse_samples_sum_ / n - 1.0 / v.samples;
  }
  push_squared_sum_ = 0;
  push_inverse_samples_sum_ = 0;
  pushes_ = 0;
  if (samples <= 0) return;

  if (velocity_.size() != mean.size()) {
    velocity_.assign(mean.size(), 0.0f);
    velocity_updates_ = 0;
  }
  const float decay = static_cast<float>(decay_);
  for (size_t i = 0; i < mean.size(); ++i) {
    const float next = decay * velocity_[i] + mean[i];
    const double change = static_cast<double>(next) - velocity_[i];
    v.velocity_change_squared += change * change;
    v.velocity_squared += static_cast<double>(next) * next;
    velocity_[i] = next;
  }
  if (++velocity_updates_ <= warmup_) return;
  versions_.push_back(v);
  while (versions_.size() > window_) versions_.pop_front();
}

void GradientStatistics::Reset() {
  push_squared_sum_ = 0;
  push_inverse_samples_sum_ = 0;
  pushes_ = 0;
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
