// Update rules: the math of every optimizer, written once and shared by dense parameter slices
// (optim::Optimizer) and sparse embedding rows (embedding::EmbeddingTable). A rule is stateless;
// the caller owns the per-element state ("slots": velocity, accumulators, moments) and the step
// count, so a dense slice keeps one slot vector per slot while an embedding row keeps its slots
// next to its value.
// Thread-safety: rules are immutable after creation; Apply is safe to call concurrently on
// disjoint parameters.
#ifndef SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_
#define SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "libs/isa/isa.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

// One update's position: its 1-based index among the updates of the parameter set (Adam's bias
// correction; for sparse rows the shard's global update count, as TensorFlow's LazyAdam does) and
// the learning rate the schedule gives it.
struct Step {
  int64_t index = 1;
  float learning_rate = 0;
};

// How one block of parameters moves given its mean gradient and its per-element state slots.
class UpdateRule {
 public:
  explicit UpdateRule(float learning_rate) : learning_rate_(learning_rate) {}
  virtual ~UpdateRule() = default;
  // "sgd", "momentum", "nesterov", "adagrad" or "adam"; checkpoints record it.
  virtual std::string_view name() const = 0;
  // Per-element state vectors the rule needs: sgd 0, momentum/nesterov 1, adagrad 1, adam 2.
  virtual int num_slots() const = 0;
  // The value every element of slot `slot` starts at: adagrad's initial_accumulator, else 0.
  virtual float slot_initial_value(int slot) const;
  // The spec's learning_rate: the peak of a schedule, the rate of a constant one.
  float learning_rate() const { return learning_rate_; }

  // params -= step. `slots` has num_slots() spans, each params.size() long. An index < 1 is
  // treated as 1.
  void Apply(std::span<float> params, std::span<const float> grad,
             std::span<const std::span<float>> slots, const Step& step) const {
    ApplyStep(params, grad, slots, step);
  }
  // The same at the spec's (constant) learning rate.
  void Apply(std::span<float> params, std::span<const float> grad,
             std::span<const std::span<float>> slots, int64_t index) const {
    ApplyStep(params, grad, slots, Step{index, learning_rate_});
  }

  // True when LookAhead moves the parameters: heavy-ball momentum and Adam, whose velocity keeps
  // moving them for updates after a gradient was computed (see LookAhead; Nesterov: no, below).
  virtual bool looks_ahead() const { return false; }
  // How much of its velocity the rule keeps per update: momentum μ (heavy ball and Nesterov),
  // Adam's β1, 0 for rules without a velocity (SGD, Adagrad). The shard's staleness cost is
  // measured on this velocity (aggregation::GradientStatistics).
  virtual double velocity_decay() const { return 0; }

  // Weight prediction for a gradient that will be `delay` updates stale by the time it is
  // applied (DANA, Hakimi et al. 2019; FTPipe's weight prediction): writes into `out` the
  // parameters expected after `delay` more updates that carry no new gradient, i.e. the
  // velocity's own drift, at `step`'s learning rate. A gradient computed there is closer to the
  // one the synchronous optimizer computes, which removes much of the implicit momentum that
  // staleness adds (Mitliagkas et al. 2016, "Asynchrony begets momentum"). On a quadratic with
  // half of each global batch one update stale and mu = 0.9, heavy ball's limit on
  // lr * curvature rises from (1 - mu) / p = 0.2 to 0.385 (tests/unit/shard/look_ahead_test.cc).
  // Nesterov in PyTorch's form already evaluates gradients at a look-ahead point; extrapolating
  // further shrinks its limit (0.77 -> 0.58 in the same setting), so Nesterov does not look
  // ahead (ADR 0007). delay <= 0, or a rule that does not look ahead: out = params.
  // `out` has params.size() elements.
  virtual void LookAhead(std::span<const float> params, std::span<const std::span<float>> slots,
                         const Step& step, double delay, std::span<float> out) const;

 protected:
  virtual void ApplyStep(std::span<float> params, std::span<const float> grad,
                         std::span<const std::span<float>> slots, const Step& step) const = 0;

 private:
  const float learning_rate_;
};

// sum_{k=1..d} r^k = r (1 - r^d) / (1 - r) for real d >= 0 (0 for d <= 0): how far a velocity
// decaying by r per update carries the parameters in d updates, in units of one update's step.
double GeometricReach(double r, double d);

// Validates `spec` and builds its rule. INVALID_ARGUMENT names the offending field:
// learning_rate <= 0 or non-finite; for MOMENTUM, momentum outside [0, 1); for ADAM, beta1 or
// beta2 outside [0, 1) or epsilon < 0 / non-finite; for ADAGRAD, epsilon or initial_accumulator
// < 0 / non-finite; an unspecified or unknown kind. Fields left 0 take job.proto's defaults:
// beta1 0.9, beta2 0.999, epsilon 1e-8 (Adam) / 1e-7 (Adagrad), initial_accumulator 0.1.
// Apply runs the loops compiled for `isa_level` (libs/optim/update_kernels.h);
// FAILED_PRECONDITION if this CPU cannot run that level.
absl::StatusOr<std::unique_ptr<UpdateRule>> CreateUpdateRule(
    const v1::OptimizerSpec& spec, isa::IsaLevel isa_level = isa::ActiveIsaLevel());

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_
