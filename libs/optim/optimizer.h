// Optimizers that live on a parameter shard and update its slice of the parameters with one
// aggregated (mean) gradient per update. Their state belongs to the shard: a change of
// aggregation mode never touches it (DESIGN §4).
// Thread-safety: thread-compatible; the shard serialises updates under its own lock.
#ifndef SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
#define SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // params -= step(grad). Both spans have the size the optimizer was created for.
  virtual void Apply(std::span<float> params, std::span<const float> grad) = 0;
  virtual std::string_view name() const = 0;
  // Bytes of optimizer state (e.g. momentum buffers), for metrics and memory budgets.
  virtual int64_t state_bytes() const = 0;
  // The optimizer's per-parameter state vectors, each aligned with the parameters (element i
  // belongs to parameter i), for checkpoints. Empty for stateless optimizers.
  virtual std::vector<std::span<float>> state_vectors() { return {}; }
};

// Validates the spec and builds the optimizer for a parameter slice of `size` elements.
// INVALID_ARGUMENT names the offending field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const v1::OptimizerSpec& spec,
                                                           int64_t size);

// Plain SGD: p -= lr * g.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(float learning_rate) : learning_rate_(learning_rate) {}
  void Apply(std::span<float> params, std::span<const float> grad) override;
  std::string_view name() const override { return "sgd"; }
  int64_t state_bytes() const override { return 0; }

 private:
  const float learning_rate_;
};

// Heavy-ball momentum (PyTorch convention, v = mu*v + g; p -= lr*v) or Nesterov
// (p -= lr*(g + mu*v)).
class Momentum final : public Optimizer {
 public:
  Momentum(float learning_rate, float momentum, bool nesterov, int64_t size)
      : learning_rate_(learning_rate), momentum_(momentum), nesterov_(nesterov), velocity_(size) {}
  void Apply(std::span<float> params, std::span<const float> grad) override;
  std::string_view name() const override { return nesterov_ ? "nesterov" : "momentum"; }
  int64_t state_bytes() const override {
    return static_cast<int64_t>(velocity_.size() * sizeof(float));
  }
  std::span<const float> velocity() const { return velocity_; }
  std::vector<std::span<float>> state_vectors() override { return {velocity_}; }

 private:
  const float learning_rate_;
  const float momentum_;
  const bool nesterov_;
  std::vector<float> velocity_;
};

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
