// A deterministic discrete-event simulation, in virtual time, of one training job with N workers
// and S shards (docs/simulation.md). What runs is the real code: the coordinator is a real
// coordinator::CoordinatorCore (membership, G split across the members, data leases from the
// real data::LeaseTable, mode control, the job's lifecycle and stop) on the virtual clock, its
// links to the simulated processes posting messages onto the event queue; each shard is a real
// shard::ShardCore (GlobalBatchAggregator, optimizer, learning-rate schedule, look-ahead pulls,
// validation) built from the coordinator's assignment and reporting to it as ShardNode does;
// the workers compute real gradients of the job's real model on its real data, with the real
// worker::LeaseBuffer. Only time is simulated: a StepTimeModel says how long each worker
// computes and how long each message travels, and an EventQueue orders what happens.
//
// A worker's step follows libs/worker/trainer.cc: take a batch from its leases (asking for the
// next lease ahead of time), pull every shard (a sync pull waits at the shard for the barrier),
// compute, push to every shard, report the step to the coordinator. The coordinator ticks every
// coordinator::kTickInterval, as CoordinatorServer's ticker does; an evaluator process scores
// the parameters every job.eval().interval_seconds and when the coordinator asks for the final
// evaluation, which ends the job.
//
// Same options, same result, bit for bit: there is no thread, no wall clock and no hash-order
// dependence, and every random draw derives from the seeds.
//
// Models with embedding tables (wide & deep, DeepFM, DCN) run as the real worker runs them: the
// batch's keys are known before the pull (Workload::PrepareTrain), routed to their owner shards
// by worker::KeyRouting (ParameterClient's own routing), pulled and pushed as SparseRows; the
// evaluator reads rows from each shard without creating them, as the real one does.
//
// Workers die and join (SimSpec.deaths, SimSpec.joins) through the coordinator's own membership
// and lease rules: a joiner is a member from its first lease request (G re-split, the shards'
// membership changed), a rejoin keeps the worker's id and supersedes a session the coordinator
// still holds. Simulated workers send no heartbeats, so the coordinator's silence bound is off:
// a death is noticed when SimSpec.deaths says.
//
// Limits (docs/simulation.md): evaluation takes no shard time; no shard or coordinator faults.
//
// Thread-safety: RunSimulation is thread-safe (each call owns its state); the workload factory,
// when given, is called on the calling thread.
#ifndef SYNCOPATE_LIBS_SIM_SIMULATION_H_
#define SYNCOPATE_LIBS_SIM_SIMULATION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/job.pb.h"
#include "syncopate/v1/sim.pb.h"

namespace syncopate::sim {

struct SimOptions {
  // The job as a coordinator gets it (defaults applied, validated): mode, N, S, G, stop, seed.
  v1::JobSpec job;
  v1::SimSpec spec;
  // Seeds the step-time model (the job's own seed drives initialisation and data order).
  uint64_t timing_seed = 1;
  // Evaluate every job.eval().interval_seconds of virtual time and at the end; off, only the end
  // is evaluated (tests that need no curve).
  bool periodic_eval = true;
  // Time to target is the first evaluation whose quality (SimEvaluation::quality, the job's
  // job::QualityMetric: accuracy, or AUC for CTR models) is at or above this (0: not tracked).
  double target_quality = 0;
  // Polled every kStopPollEvents events; once it returns true the run ends with CANCELLED
  // (`syncopate sim` passes runtime::ShutdownRequested, so SIGTERM and Ctrl-C stop a long run).
  // Empty: never stopped. Not part of the result: a run that is not stopped is unaffected.
  std::function<bool()> stop_requested;
};

// How many events run between two polls of SimOptions::stop_requested: ~1-10 ms of real time.
inline constexpr int64_t kStopPollEvents = 1024;

struct SimEvaluation {
  double seconds = 0;  // virtual time of the evaluation
  int64_t examples = 0;
  double accuracy = 0;
  double loss = 0;
  double auc = 0;
  double quality = 0;  // the job's quality metric: `accuracy`, or `auc` for CTR models
};

struct SimSwitch {
  double seconds = 0;
  int32_t shard = 0;
  v1::Mode mode = v1::MODE_UNSPECIFIED;
  std::string reason;
};

// A worker the coordinator accepted after the start (SimSpec.joins).
struct SimJoin {
  double seconds = 0;  // virtual time its hello was accepted
  int32_t worker = 0;  // its id
};

// One worker's work as the coordinator counted it from step reports, over all its lives.
struct SimWorkerTally {
  int32_t id = 0;  // the coordinator's (0: never accepted)
  int index = 0;   // the spec's worker index
  int64_t steps = 0;
  int64_t examples = 0;
  double first_step_seconds = 0;  // when its first step report arrived (0 without one)
};

struct SimResult {
  // Virtual time from the start to the final evaluation's end: the workers stop, the
  // coordinator (on its next tick) asks the evaluator, which scores and reports.
  double wall_seconds = 0;
  double training_seconds = 0;  // virtual time at which the last worker stopped training
  int64_t examples = 0;         // examples the coordinator counted from step reports
  int64_t steps = 0;
  std::vector<int64_t> shard_versions;     // updates applied, per shard
  v1::GradientCounters gradients;          // pushes by outcome, summed over the shards
  std::vector<SimEvaluation> evaluations;  // periodic ones, then the final one
  std::string quality_metric;              // job::QualityMetric(job): "accuracy" or "auc"
  std::optional<double> seconds_to_target;
  std::vector<SimSwitch> switches;
  std::vector<int32_t> dead_workers;  // the coordinator's worker ids, in order of death
  std::vector<SimJoin> joins;         // in order of acceptance
  // One per worker of the spec, in the order of its first hello: those at the start in index
  // order, then the joiners.
  std::vector<SimWorkerTally> workers;
  int64_t events = 0;
  // The final parameters, flat (all shards' ranges in order).
  std::vector<float> parameters;
  // Embedding rows the shards hold at the end (created by training pulls and pushes).
  int64_t embedding_rows = 0;

  const SimEvaluation& final_evaluation() const { return evaluations.back(); }
};

// A SimSpec from text format, checked against nothing yet (RunSimulation checks it against the
// job). INVALID_ARGUMENT with the line and column of a syntax error.
absl::StatusOr<v1::SimSpec> ParseSimSpec(absl::string_view text);
// NOT_FOUND for a missing file; errors name the path.
absl::StatusOr<v1::SimSpec> LoadSimSpecFile(const std::string& path);

// Runs the job to its stop condition. INVALID_ARGUMENT for a bad spec or job, DEADLINE_EXCEEDED
// past spec.max_virtual_seconds, CANCELLED once options.stop_requested says so, INTERNAL if the
// cluster stalls (no event left before the job is done: a bug, reported with the state).
absl::StatusOr<SimResult> RunSimulation(const SimOptions& options);

}  // namespace syncopate::sim

#endif  // SYNCOPATE_LIBS_SIM_SIMULATION_H_
