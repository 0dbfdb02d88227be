// How long things take in a simulated cluster, from a SimSpec (protos/syncopate/v1/sim.proto):
// each worker's compute-only step time, when workers join and die, message transit
// times and a shard's service time per message. Nothing else of a simulation is modelled.
//
// Reproducibility: every worker draws from its own stream (std::mt19937_64, whose output the C++
// standard fixes, seeded through SplitMix64 from (seed, worker)), turned into numbers by the
// inverse-CDF and Box-Muller formulas written here (std::*_distribution are
// implementation-defined). One worker's draws never shift another's, so adding a death or a
// slowdown to worker 7 leaves worker 3's step times unchanged.
//
// Thread-safety: NOT thread-safe (thread-compatible); ComputeSeconds advances the streams.
#ifndef SYNCOPATE_LIBS_SIM_STEP_TIME_MODEL_H_
#define SYNCOPATE_LIBS_SIM_STEP_TIME_MODEL_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "syncopate/v1/sim.pb.h"

namespace syncopate::sim {

// One step's compute time, and the part of it that is a hiccup.
struct StepCompute {
  double seconds = 0;  // what the worker's step takes on a machine of its own
  double hiccup_seconds = 0;
};

// One life of a worker process, from its start to its death (SimSpec.joins, SimSpec.deaths).
struct WorkerLife {
  bool at_start = false;    // there when the job starts (no hello in the simulation)
  double join_seconds = 0;  // otherwise: when the process starts and says hello
  std::optional<v1::WorkerDeath> death;
};

class StepTimeModel {
 public:
  // INVALID_ARGUMENT naming the field for negative times, factors <= 0, worker indices outside
  // [0, num_workers), a hiccup probability outside [0, 1] or a hiccup alpha <= 0 where hiccups
  // are on, or cpu, startup or evaluation fields below 0; joins and deaths of a worker that do
  // not alternate in time, or no worker there at the start.
  static absl::StatusOr<StepTimeModel> Create(const v1::SimSpec& spec, int num_workers,
                                              uint64_t seed);

  // Compute-only seconds of a step of worker `index` over `examples` examples that starts at
  // `now_seconds` of virtual time. Draws from the worker's stream.
  double ComputeSeconds(int index, int64_t examples, double now_seconds) {
    return Compute(index, examples, now_seconds).seconds;
  }
  // The same draw, with its hiccup part apart (under CPU contention only the rest is padded CPU
  // work).
  StepCompute Compute(int index, int64_t examples, double now_seconds);
  // The product of the worker's persistent speed factor and the transient slowdowns active at
  // `now_seconds` (no noise).
  double Slowdown(int index, double now_seconds) const;
  // The lives of worker `index` in time order (SimSpec.joins and .deaths): at least one; only
  // the first may start at the job's start, only the last may have no death.
  const std::vector<WorkerLife>& Lives(int index) const { return lives_[index]; }

  // latency + bytes / bandwidth.
  double MessageSeconds(int64_t bytes) const {
    return spec_.network().latency_seconds() + MessageTransferSeconds(bytes);
  }
  // bytes / bandwidth (0 for infinite bandwidth).
  double MessageTransferSeconds(int64_t bytes) const;
  // A shard's time to serve one message of `bytes`.
  double ShardServiceSeconds(int64_t bytes) const;

  const v1::SimSpec& spec() const { return spec_; }

 private:
  StepTimeModel(const v1::SimSpec& spec, int num_workers, uint64_t seed,
                std::vector<std::vector<WorkerLife>> lives);
  // Uniform in the open interval (0, 1) from 53 random bits.
  double Uniform(int index);
  double StandardNormal(int index);

  v1::SimSpec spec_;
  std::vector<double> speed_;                   // per worker
  std::vector<std::mt19937_64> streams_;        // per worker
  std::vector<std::vector<WorkerLife>> lives_;  // per worker
};

}  // namespace syncopate::sim

#endif  // SYNCOPATE_LIBS_SIM_STEP_TIME_MODEL_H_
