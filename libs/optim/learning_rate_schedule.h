// The learning rate as a function of training progress (job.proto's LearningRateSchedule).
//
// Progress is counted in global batches applied: samples consumed / G. Every mode consumes G
// samples per update (sync and gba by construction, async as N updates of G/N), so the same
// schedule reads the same whatever the mode and survives a switch without retuning (ADR 0007).
// Thread-safety: immutable after Create; At() is safe to call concurrently.
#ifndef SYNCOPATE_LIBS_OPTIM_LEARNING_RATE_SCHEDULE_H_
#define SYNCOPATE_LIBS_OPTIM_LEARNING_RATE_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

class LearningRateSchedule {
 public:
  // Validates `spec` against `peak` (the optimizer's learning_rate). INVALID_ARGUMENT names the
  // field ("optimizer.schedule.<field>") in one line: a negative warmup or total, a
  // warmup_fraction outside [0, 1) or together with warmup_updates, COSINE/LINEAR
  // with total_updates <= warmup_updates (when set), final_fraction outside [0, 1], STEP without
  // step_updates > 0 or with step_gamma outside [0, 1], an unknown decay.
  static absl::StatusOr<LearningRateSchedule> Create(const v1::LearningRateSchedule& spec,
                                                     float peak);

  // The rate after `progress` global batches (>= 0; fractional between updates).
  float At(double progress) const;
  float peak() const { return peak_; }

 private:
  LearningRateSchedule(const v1::LearningRateSchedule& spec, float peak)
      : spec_(spec), peak_(peak) {}

  v1::LearningRateSchedule spec_;
  float peak_;
};

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_LEARNING_RATE_SCHEDULE_H_
