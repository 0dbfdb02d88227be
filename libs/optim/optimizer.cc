#include "libs/optim/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace syncopate::optim {

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const v1::OptimizerSpec& spec,
                                                           int64_t size) {
  if (size < 0) return absl::InvalidArgumentError("optimizer: negative parameter count");
  if (!(spec.learning_rate() > 0) || !std::isfinite(spec.learning_rate())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.learning_rate must be a positive finite number, got ", spec.learning_rate()));
  }
  switch (spec.kind()) {
    case v1::OptimizerSpec::SGD:
      return std::make_unique<Sgd>(spec.learning_rate());
    case v1::OptimizerSpec::MOMENTUM:
      if (!(spec.momentum() >= 0 && spec.momentum() < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer.momentum must be in [0, 1), got ", spec.momentum()));
      }
      return std::make_unique<Momentum>(spec.learning_rate(), spec.momentum(), spec.nesterov(),
                                        size);
    default:
      return absl::InvalidArgumentError("optimizer.kind must be SGD or MOMENTUM");
  }
}

void Sgd::Apply(std::span<float> params, std::span<const float> grad) {
  const size_t n = params.size();
  float* p = params.data();
  const float* g = grad.data();
  for (size_t i = 0; i < n; ++i) p[i] -= learning_rate_ * g[i];
}

void Momentum::Apply(std::span<float> params, std::span<const float> grad) {
  const size_t n = params.size();
  float* p = params.data();
  float* v = velocity_.data();
  const float* g = grad.data();
  if (nesterov_) {
    for (size_t i = 0; i < n; ++i) {
      v[i] = momentum_ * v[i] + g[i];
      p[i] -= learning_rate_ * (g[i] + momentum_ * v[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      v[i] = momentum_ * v[i] + g[i];
      p[i] -= learning_rate_ * v[i];
    }
  }
}

}  // namespace syncopate::optim
