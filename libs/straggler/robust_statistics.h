// Robust summary statistics shared by StragglerDetector and ModePolicy, so both read dispersion
// the same way, and the one Median (CoordinatorCore's per-worker median compute time uses it too,
// so `syncopate status` shows a median and a slowdown computed alike).
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_STRAGGLER_ROBUST_STATISTICS_H_
#define SYNCOPATE_LIBS_STRAGGLER_ROBUST_STATISTICS_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace syncopate {

// The sample median; the mean of the two middle values for an even count. 0 for no values.
double Median(std::vector<double> values);

// 1.4826 · MAD (median absolute deviation from the median): a standard-deviation estimate that
// ignores up to half the sample being outliers. 1.4826 = 1/Φ⁻¹(3/4) makes it consistent with σ
// for normal data (Rousseeuw & Croux, JASA 88(424), 1993). 0 for no values.
double RobustSigma(const std::vector<double>& values);

// Median and RobustSigma of f(x) over `ascending`, a sample already in ascending order, for a
// non-decreasing f (nullptr: the identity): the values Median and RobustSigma return for the
// transformed copy, bit for bit, from O(log n) elements instead of O(n) work and a copy.
// StragglerDetector keeps its windows sorted so that one assessment of N workers with windows of
// W steps costs O(N log W), not O(N·W) (issue 12: 1,000 workers x 16 shards within 10 ms).
// The MAD is the median of two ascending sequences (the deviations below the centre, read from
// the centre outwards, and those above it), found by a binary search on how many of the k
// smallest come from each.
struct SortedSummary {
  double median = 0;
  double robust_sigma = 0;
};
SortedSummary SummarizeSorted(absl::Span<const double> ascending, double (*f)(double) = nullptr);

// Standard error of the median of n samples with noise σ: √(π/2)·σ/√n, the median's asymptotic
// variance πσ²/(2n) for normal data (e.g. Kendall & Stuart, The Advanced Theory of Statistics,
// vol. 1). An approximation for small n and non-normal noise; it is used for noise floors and
// error bands, where its order of magnitude is what matters. 0 for n = 0.
double MedianStandardError(double sigma, size_t n);

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_ROBUST_STATISTICS_H_
