// Where a job's evaluation points fall and how much of the test set each scores (EvalSpec;
// ADR 0015): the coordinator spaces the points when it resolves the run's length, and the
// evaluator sizes each point's test pass from the same resolved spec, so both read one rule.
// Thread-safety: constants and pure functions; safe from any thread.
#ifndef SYNCOPATE_LIBS_JOB_EVAL_POINTS_H_
#define SYNCOPATE_LIBS_JOB_EVAL_POINTS_H_

#include <cstdint>

#include "syncopate/v1/job.pb.h"

namespace syncopate::job {

// Evaluation points a run has when EvalSpec.every_global_batches is left 0 (issue 31 asks for at
// least 20, so that time to a target rests on the curve rather than on where a few evaluations
// happen to fall).
inline constexpr int64_t kEvalPointsPerRun = 25;

// k, the global batches between two points, for a run of `run` global batches whose epoch is
// `epoch` of them: max(1, min(run / kEvalPointsPerRun, epoch)), i.e. kEvalPointsPerRun points,
// and one per epoch beyond kEvalPointsPerRun epochs: a 1000-epoch job would otherwise wait 4% of
// its run, minutes, for its first evaluation.
int64_t EvalPointSpacing(int64_t run, int64_t epoch);

// Evaluation's share of the compute of the training between two points, at most (issue 43).
// Unbounded, 25 passes over a test set of 10,000 are 250,000 forwards against a 2-epoch default
// job's 120,000 training examples: more forwards than training's. On the 2-core dev machine that
// did not show in the job's rate (the evaluator runs at nice 10: docs/measurements/
// throughput.md, "Evaluation within a budget"), but a job whose test set is large against its
// training would pay it wherever cores are not spare; the bound holds by construction.
inline constexpr int64_t kEvalComputePercent = 10;

// A training example costs about three forward passes: its forward pass, then a backward pass
// of about twice the forward's multiply-adds (the gradients with respect to each layer's inputs
// and to its weights; Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section
// 2.1: C = 6N per example trained against 2N per forward). An evaluated example is one forward.
inline constexpr int64_t kForwardsPerTrainingExample = 3;

// How many of the test set's examples an evaluation point scores: its first
// ceil(kEvalComputePercent% x kForwardsPerTrainingExample x k x G), k x G being the examples
// trained between two points; the same ones at every point, so the points' scores differ by
// the parameters only. 0: the whole set (a job that evaluates by time, or whose k or G is 0).
// The final evaluation and a point the validation set chooses as the version the job keeps
// (ADR 0017) score the whole test set, and the validation set is always scored whole. Reads a
// resolved spec (ResolveRunLength has set k).
int64_t EvalPointTestExamples(const v1::JobSpec& spec);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_EVAL_POINTS_H_
