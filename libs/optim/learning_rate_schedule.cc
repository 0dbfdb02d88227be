#include "libs/optim/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace syncopate::optim {
namespace {

using Spec = ::syncopate::v1::LearningRateSchedule;

// Step decay's default factor per drop, the common ResNet choice (He et al., 2016).
constexpr float kDefaultStepGamma = 0.1f;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer.schedule.", field, " ", what));
}

}  // namespace

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Create(const Spec& spec, float peak) {
  if (spec.warmup_updates() < 0) {
    return Invalid("warmup_updates", absl::StrCat("must be >= 0, got ", spec.warmup_updates()));
  }
  if (spec.total_updates() < 0) {
    return Invalid("total_updates", absl::StrCat("must be >= 0, got ", spec.total_updates()));
  }
  const float w = spec.warmup_fraction();
  if (!(w >= 0 && w < 1)) {
    return Invalid("warmup_fraction", absl::StrCat("must be in [0, 1), got ", w));
  }
  if (w > 0 && spec.warmup_updates() > 0) {
    return Invalid("warmup_fraction", "and warmup_updates exclude each other: set one");
  }
  const float f = spec.final_fraction();
  if (!(f >= 0 && f <= 1)) {
    return Invalid("final_fraction", absl::StrCat("must be in [0, 1], got ", f));
  }
  Spec resolved = spec;
  switch (spec.decay()) {
    case Spec::DECAY_UNSPECIFIED:
    case Spec::CONSTANT:
      break;
    case Spec::COSINE:
    case Spec::LINEAR:
      if (spec.total_updates() != 0 && spec.total_updates() <= spec.warmup_updates()) {
        return Invalid("total_updates",
                       absl::StrCat("must exceed warmup_updates (", spec.warmup_updates(),
                                    "), got ", spec.total_updates()));
      }
      break;
    case Spec::STEP:
      if (spec.step_updates() <= 0) {
        return Invalid("step_updates",
                       absl::StrCat("must be > 0 for STEP decay, got ", spec.step_updates()));
      }
      if (!(spec.step_gamma() >= 0 && spec.step_gamma() <= 1)) {
        return Invalid("step_gamma", absl::StrCat("must be in (0, 1] (0 = the default, 0.1), got ",
                                                  spec.step_gamma()));
      }
      if (spec.step_gamma() == 0) resolved.set_step_gamma(kDefaultStepGamma);
      break;
    default:
      return Invalid("decay", absl::StrCat("must be CONSTANT, COSINE, LINEAR or STEP, got ",
                                           static_cast<int>(spec.decay())));
  }
  return LearningRateSchedule(resolved, peak);
}

float LearningRateSchedule::At(double progress) const {
  progress = std::max(progress, 0.0);
  const double warmup = static_cast<double>(spec_.warmup_updates());
  // Linear warmup (Goyal et al., 2017) from peak/warmup at the first update to the peak.
  if (progress < warmup) return static_cast<float>(peak_ * (progress + 1) / (warmup + 1));
  const double after = progress - warmup;
  const double f = spec_.final_fraction();
  switch (spec_.decay()) {
    case Spec::COSINE:
    case Spec::LINEAR: {
      // total_updates 0 means "not resolved": without a length there is nothing to decay over.
      if (spec_.total_updates() == 0) return peak_;
      const double t = std::min(after / (static_cast<double>(spec_.total_updates()) - warmup), 1.0);
      const double shape = spec_.decay() == Spec::COSINE
                               ? (1 + std::cos(std::numbers::pi * t)) / 2  // Loshchilov & Hutter
                               : 1 - t;
      return static_cast<float>(peak_ * (f + (1 - f) * shape));
    }
    case Spec::STEP: {
      const double drops = std::floor(after / static_cast<double>(spec_.step_updates()));
      return static_cast<float>(peak_ * std::pow(spec_.step_gamma(), drops));
    }
    default:
      return peak_;
  }
}

}  // namespace syncopate::optim
