// Small-sample confidence intervals for benchmark results: the mean of K seeded runs, the
// difference of two policies' means (Welch) and their ratio (Fieller), all with Student-t
// quantiles, and the rule that turns an interval into a goal's verdict. The benchmark's K is
// small (3-5 seeds), so normal quantiles would understate the width by 30-60%; t quantiles
// are exact for normal samples and the usual choice for any other small sample.
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_STATS_CONFIDENCE_H_
#define SYNCOPATE_LIBS_STATS_CONFIDENCE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::stats {

// n, mean and the sample standard deviation (divisor n − 1; 0 for n < 2).
struct SampleSummary {
  size_t n = 0;
  double mean = 0;
  double std_dev = 0;
};
SampleSummary Summarize(const std::vector<double>& values);

// P(T ≤ t) for Student's t with `df` > 0 degrees of freedom (real df, as Welch needs), through
// the regularized incomplete beta function: P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2).
double StudentTCdf(double t, double df);

// The p-quantile of Student's t with `df` > 0 degrees of freedom, p in (0, 1); accurate to
// ~1e-12 relative (bisection on the CDF). StudentTQuantile(0.975, 4) = 2.776.
double StudentTQuantile(double p, double df);

// P(Z ≤ z) for a standard normal Z.
double NormalCdf(double z);
// The p-quantile of the standard normal, p in (0, 1), by the same bisection.
// NormalQuantile(0.975) = 1.960.
double NormalQuantile(double p);

// A two-sided confidence interval around an estimate. An interval that cannot be bounded (a
// ratio whose denominator is not distinguishable from zero) has low = −∞ and high = +∞.
struct Interval {
  double estimate = 0;
  double low = 0;
  double high = 0;
  double df = 0;  // degrees of freedom of the t quantile used
};

// mean(x) ± t_{(1+c)/2, n−1} · s/√n. Needs n ≥ 2 and confidence in (0, 1).
absl::StatusOr<Interval> MeanInterval(const std::vector<double>& x, double confidence);

// Welch's interval for mean(a) − mean(b), two independent samples with possibly unequal
// variances: ± t_{(1+c)/2, ν} · √(s_a²/n_a + s_b²/n_b), ν by Welch–Satterthwaite (Welch,
// Biometrika 34, 1947). Needs n_a, n_b ≥ 2. Two constant samples give the point interval.
absl::StatusOr<Interval> WelchDifferenceInterval(const std::vector<double>& a,
                                                 const std::vector<double>& b, double confidence);

// Welch–Satterthwaite degrees of freedom of a sum of two independent means' variances u and v
// (squared standard errors): ν = (u + v)² / (u²/(n_a−1) + v²/(n_b−1)). When one variance is 0,
// ν is the other sample's n − 1; both 0 gives 0 (no noise: the caller needs no quantile).
double WelchDegreesOfFreedom(double u, size_t n_a, double v, size_t n_b);

// Fieller's interval for mean(a) / mean(b), independent samples (Fieller, JRSS B 16, 1954): the
// set of R with (ā − R·b̄)² ≤ t² (s_a²/n_a + R² s_b²/n_b), t the (1+c)/2 quantile with ν from
// Welch–Satterthwaite for ā − R·b̄ at R = ā/b̄. Unlike the delta method it stays honest when the
// denominator is noisy: when b̄ is within t standard errors of 0 the set is unbounded and the
// interval is (−∞, +∞). Needs n_a, n_b ≥ 2 and b̄ ≠ 0.
absl::StatusOr<Interval> FiellerRatioInterval(const std::vector<double>& a,
                                              const std::vector<double>& b, double confidence);

// How an interval reads against a goal "true value ≤ bound" (or ≥ bound): met when the whole
// interval satisfies it, not met when the whole interval violates it, undecided when the
// interval straddles the bound (the runs cannot tell). With 95% intervals, "met" and "not met"
// are each wrong at most 2.5% of the time for a single goal (one side of a two-sided interval).
enum class Verdict { kMet, kNotMet, kUndecided };
enum class Direction { kAtMost, kAtLeast };
Verdict ReadVerdict(const Interval& interval, Direction direction, double bound);
std::string VerdictName(Verdict verdict);  // "met", "not met", "undecided"

}  // namespace syncopate::stats

#endif  // SYNCOPATE_LIBS_STATS_CONFIDENCE_H_
