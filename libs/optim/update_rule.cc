#include "libs/optim/update_rule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/optim/update_kernels.h"

namespace syncopate::optim {
namespace {

using ::syncopate::v1::OptimizerSpec;

// Defaults for fields a spec leaves 0 (job.proto documents them): Adam's are Kingma & Ba's
// (2015); Adagrad's epsilon and initial accumulator are TensorFlow/Keras's.
constexpr float kDefaultBeta1 = 0.9f;
constexpr float kDefaultBeta2 = 0.999f;
constexpr float kDefaultAdamEpsilon = 1e-8f;
constexpr float kDefaultAdagradEpsilon = 1e-7f;
constexpr float kDefaultInitialAccumulator = 0.1f;

// Plain SGD: p -= lr * g.
class SgdRule final : public UpdateRule {
 public:
  SgdRule(float learning_rate, const UpdateKernels& kernels)
      : UpdateRule(learning_rate), kernels_(kernels) {}
  std::string_view name() const override { return "sgd"; }
  int num_slots() const override { return 0; }

 protected:
  void ApplyStep(std::span<float> params, std::span<const float> grad,
                 std::span<const std::span<float>> slots, const Step& step) const override {
    kernels_.sgd(params.data(), grad.data(), params.size(), step.learning_rate);
  }

 private:
  const UpdateKernels& kernels_;
};

// Heavy-ball momentum (PyTorch convention, v = mu*v + g; p -= lr*v) or Nesterov
// (p -= lr*(g + mu*v)). Slot 0 is the velocity.
class MomentumRule final : public UpdateRule {
 public:
  MomentumRule(float learning_rate, float momentum, bool nesterov, const UpdateKernels& kernels)
      : UpdateRule(learning_rate), momentum_(momentum), nesterov_(nesterov), kernels_(kernels) {}
  std::string_view name() const override { return nesterov_ ? "nesterov" : "momentum"; }
  int num_slots() const override { return 1; }
  bool looks_ahead() const override { return momentum_ > 0 && !nesterov_; }
  double velocity_decay() const override { return momentum_; }

  // With no new gradient the velocity decays as mu^k v, so heavy ball moves
  // lr * sum_{k=1..d} mu^k * v in d updates.
  void LookAhead(std::span<const float> params, std::span<const std::span<float>> slots,
                 const Step& step, double delay, std::span<float> out) const override {
    if (!looks_ahead()) return UpdateRule::LookAhead(params, slots, step, delay, out);
    const float scale = static_cast<float>(step.learning_rate * GeometricReach(momentum_, delay));
    const float* v = slots[0].data();
    for (size_t i = 0; i < params.size(); ++i) out[i] = params[i] - scale * v[i];
  }

 protected:
  void ApplyStep(std::span<float> params, std::span<const float> grad,
                 std::span<const std::span<float>> slots, const Step& step) const override {
    (nesterov_ ? kernels_.nesterov : kernels_.momentum)(
        params.data(), slots[0].data(), grad.data(), params.size(), step.learning_rate, momentum_);
  }

 private:
  const float momentum_;
  const bool nesterov_;
  const UpdateKernels& kernels_;
};

// Adagrad (Duchi, Hazan & Singer, JMLR 2011), Keras's form: acc += g^2;
// p -= lr * g / (sqrt(acc) + eps). Slot 0 is the accumulator; it starts at initial_accumulator
// so the first steps of a rare feature's row are not huge.
class AdagradRule final : public UpdateRule {
 public:
  AdagradRule(float learning_rate, float epsilon, float initial_accumulator,
              const UpdateKernels& kernels)
      : UpdateRule(learning_rate),
        epsilon_(epsilon),
        initial_accumulator_(initial_accumulator),
        kernels_(kernels) {}
  std::string_view name() const override { return "adagrad"; }
  int num_slots() const override { return 1; }
  float slot_initial_value(int slot) const override { return initial_accumulator_; }

 protected:
  void ApplyStep(std::span<float> params, std::span<const float> grad,
                 std::span<const std::span<float>> slots, const Step& step) const override {
    kernels_.adagrad(params.data(), slots[0].data(), grad.data(), params.size(), step.learning_rate,
                     epsilon_);
  }

 private:
  const float epsilon_;
  const float initial_accumulator_;
  const UpdateKernels& kernels_;
};

// Adam (Kingma & Ba, ICLR 2015) in TensorFlow's formulation, which folds the bias corrections
// into the step size: lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); p -= lr_t * m / (sqrt(v) + eps).
// Slot 0 is the first moment m, slot 1 the second moment v.
class AdamRule final : public UpdateRule {
 public:
  AdamRule(float learning_rate, float beta1, float beta2, float epsilon,
           const UpdateKernels& kernels)
      : UpdateRule(learning_rate),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon),
        kernels_(kernels) {}
  std::string_view name() const override { return "adam"; }
  int num_slots() const override { return 2; }
  bool looks_ahead() const override { return beta1_ > 0; }
  double velocity_decay() const override { return beta1_; }

  // With no new gradient m decays as b1^k m while v barely moves (b2 is close to 1), so d
  // updates move step_size * sum_{k=1..d} b1^k * m / (sqrt(v) / bias2_sqrt + eps).
  void LookAhead(std::span<const float> params, std::span<const std::span<float>> slots,
                 const Step& step, double delay, std::span<float> out) const override {
    const Correction c = CorrectionAt(step);
    const float scale = static_cast<float>(c.step_size * GeometricReach(beta1_, delay));
    const float* m = slots[0].data();
    const float* v = slots[1].data();
    for (size_t i = 0; i < params.size(); ++i) {
      out[i] = params[i] - scale * m[i] / (std::sqrt(v[i]) / c.bias2_sqrt + epsilon_);
    }
  }

 protected:
  void ApplyStep(std::span<float> params, std::span<const float> grad,
                 std::span<const std::span<float>> slots, const Step& step) const override {
    const Correction c = CorrectionAt(step);
    kernels_.adam(params.data(), slots[0].data(), slots[1].data(), grad.data(), params.size(),
                  c.step_size, c.bias2_sqrt, beta1_, beta2_, epsilon_);
  }

 private:
  // Adam's bias correction as torch.optim.Adam computes it: step_size = lr / (1 - b1^t) and
  // sqrt(1 - b2^t), in double (b2^t for b2 = 0.999 loses most of its digits in float after a few
  // thousand steps, and 1 - b1^t must not round to 0 at t = 1), each then a float.
  struct Correction {
    float step_size;
    float bias2_sqrt;
  };
  Correction CorrectionAt(const Step& step) const {
    const double t = static_cast<double>(std::max<int64_t>(step.index, 1));
    return {static_cast<float>(step.learning_rate / (1.0 - std::pow(beta1_, t))),
            static_cast<float>(std::sqrt(1.0 - std::pow(beta2_, t)))};
  }

  const float beta1_;
  const float beta2_;
  const float epsilon_;
  const UpdateKernels& kernels_;
};

absl::Status OutOfRange(absl::string_view field, float value, absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", field, " must be ", range, ", got ", value));
}

// A field where 0 means "the default": returns the value to use, or an error if it is negative
// or not finite.
absl::StatusOr<float> NonNegativeOrDefault(absl::string_view field, float value,
                                           float default_value) {
  if (!(value >= 0) || !std::isfinite(value)) {
    return OutOfRange(field, value, "a finite number >= 0 (0 = the default)");
  }
  return value == 0 ? default_value : value;
}

// Adam's betas: [0, 1), with 0 meaning the default.
absl::StatusOr<float> BetaOrDefault(absl::string_view field, float value, float default_value) {
  if (!(value >= 0 && value < 1)) return OutOfRange(field, value, "in [0, 1) (0 = the default)");
  return value == 0 ? default_value : value;
}

}  // namespace

float UpdateRule::slot_initial_value(int slot) const { return 0.0f; }

void UpdateRule::LookAhead(std::span<const float> params, std::span<const std::span<float>> slots,
                           const Step& step, double delay, std::span<float> out) const {
  std::copy(params.begin(), params.end(), out.begin());
}

double GeometricReach(double r, double d) {
  if (!(d > 0) || r <= 0) return 0;
  if (r >= 1) return d;
  return r * (1 - std::pow(r, d)) / (1 - r);
}

absl::StatusOr<std::unique_ptr<UpdateRule>> CreateUpdateRule(const OptimizerSpec& spec,
                                                             isa::IsaLevel isa_level) {
  if (isa_level > isa::HighestSupportedIsaLevel()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "update kernels for ISA level ", isa::IsaLevelName(isa_level), " cannot run on this CPU"));
  }
  const UpdateKernels& kernels = UpdateKernelsFor(isa_level);
  const float lr = spec.learning_rate();
  if (!(lr > 0) || !std::isfinite(lr)) {
    return OutOfRange("learning_rate", lr, "a positive finite number");
  }
  switch (spec.kind()) {
    case OptimizerSpec::SGD:
      return std::make_unique<SgdRule>(lr, kernels);
    case OptimizerSpec::MOMENTUM:
      if (!(spec.momentum() >= 0 && spec.momentum() < 1)) {
        return OutOfRange("momentum", spec.momentum(), "in [0, 1)");
      }
      return std::make_unique<MomentumRule>(lr, spec.momentum(), spec.nesterov(), kernels);
    case OptimizerSpec::ADAGRAD: {
      SYNCOPATE_ASSIGN_OR_RETURN(
          const float epsilon,
          NonNegativeOrDefault("epsilon", spec.epsilon(), kDefaultAdagradEpsilon));
      SYNCOPATE_ASSIGN_OR_RETURN(
          const float initial,
          NonNegativeOrDefault("initial_accumulator", spec.initial_accumulator(),
                               kDefaultInitialAccumulator));
      return std::make_unique<AdagradRule>(lr, epsilon, initial, kernels);
    }
    case OptimizerSpec::ADAM: {
      SYNCOPATE_ASSIGN_OR_RETURN(const float beta1,
                                 BetaOrDefault("beta1", spec.beta1(), kDefaultBeta1));
      SYNCOPATE_ASSIGN_OR_RETURN(const float beta2,
                                 BetaOrDefault("beta2", spec.beta2(), kDefaultBeta2));
      SYNCOPATE_ASSIGN_OR_RETURN(
          const float epsilon,
          NonNegativeOrDefault("epsilon", spec.epsilon(), kDefaultAdamEpsilon));
      return std::make_unique<AdamRule>(lr, beta1, beta2, epsilon, kernels);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer.kind must be SGD, MOMENTUM, ADAGRAD or ADAM, got ",
                       static_cast<int>(spec.kind())));
  }
}

}  // namespace syncopate::optim
