#include "libs/job/eval_points.h"

#include <algorithm>

namespace syncopate::job {

int64_t EvalPointSpacing(int64_t run, int64_t epoch) {
  return std::max<int64_t>(1, std::min(run / kEvalPointsPerRun, epoch));
}

int64_t EvalPointTestExamples(const v1::JobSpec& spec) {
  const int64_t between_points = spec.eval().every_global_batches() * spec.global_batch();
  if (spec.eval().by_time() || between_points <= 0) return 0;
  // In integers: 10% x 3 x 19,200 is 5,760, where a double's 0.1 x 3 rounds up to 5,761.
  return (between_points * kForwardsPerTrainingExample * kEvalComputePercent + 99) / 100;
}

}  // namespace syncopate::job
