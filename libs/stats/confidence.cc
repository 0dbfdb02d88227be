#include "libs/stats/confidence.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"

namespace syncopate::stats {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Continued fraction of the incomplete beta function, evaluated with the modified Lentz method
// (Lentz, Applied Optics 15, 1976; the even/odd recurrence of Abramowitz & Stegun 26.5.8).
// Converges fast for x < (a+1)/(a+b+2); the caller uses the symmetry I_x(a,b) = 1 − I_{1−x}(b,a)
// for larger x.
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;  // stands in for a zero denominator (Lentz's rule)
  constexpr double kEpsilon = 1e-15;
  constexpr int kMaxTerms = 1000;  // t quantiles for df ≥ 0.5 converge in well under 100
  double c = 1;
  double d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxTerms; ++m) {
    // Even step: d_{2m} = m(b − m)x / ((a + 2m − 1)(a + 2m)).
    double numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 + numerator * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + numerator / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    // Odd step: d_{2m+1} = −(a + m)(a + b + m)x / ((a + 2m)(a + 2m + 1)).
    numerator = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 + numerator * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + numerator / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < kEpsilon) break;
  }
  return h;
}

// The regularized incomplete beta function I_x(a, b), a, b > 0.
double RegularizedIncompleteBeta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  // x^a (1−x)^b / B(a, b), in logs so large a, b do not overflow.
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

absl::Status CheckConfidence(double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence must be in (0, 1), got ", confidence));
  }
  return absl::OkStatus();
}

absl::Status CheckSampleSize(size_t n, const char* name) {
  if (n < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("an interval needs at least 2 values of ", name, ", got ", n));
  }
  return absl::OkStatus();
}

// The preconditions of a two-sample interval.
absl::Status CheckTwoSamples(const std::vector<double>& a, const std::vector<double>& b,
                             double confidence) {
  SYNCOPATE_RETURN_IF_ERROR(CheckConfidence(confidence));
  SYNCOPATE_RETURN_IF_ERROR(CheckSampleSize(a.size(), "the first sample"));
  return CheckSampleSize(b.size(), "the second sample");
}

// Mean and squared standard error (s²/n) of a sample.
std::pair<double, double> MeanAndSquaredError(const std::vector<double>& x) {
  const SampleSummary s = Summarize(x);
  return {s.mean, s.std_dev * s.std_dev / static_cast<double>(s.n)};
}

// The p-quantile (p > 0.5) of a symmetric distribution by its CDF: bracket, then bisect. The CDF
// is monotone, so bisection cannot fail, and 200 halvings of a bracket of at most 2^1024 reach
// double precision.
template <typename Cdf>
double UpperQuantileByBisection(double p, Cdf cdf) {
  double low = 0, high = 1;
  while (cdf(high) < p && high < 1e300) high *= 2;
  for (int i = 0; i < 200 && high - low > 1e-13 * high; ++i) {
    const double mid = 0.5 * (low + high);
    (cdf(mid) < p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

}  // namespace

SampleSummary Summarize(const std::vector<double>& values) {
  SampleSummary s;
  s.n = values.size();
  if (s.n == 0) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) return s;
  // Two passes: the textbook formula, exact enough for a handful of values and free of the
  // cancellation of the one-pass Σx² − n·x̄².
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.std_dev = std::sqrt(squares / static_cast<double>(s.n - 1));
  return s;
}

double StudentTCdf(double t, double df) {
  const double tail = 0.5 * RegularizedIncompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t > 0 ? 1 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  if (p == 0.5) return 0;
  if (p < 0.5) return -StudentTQuantile(1 - p, df);
  return UpperQuantileByBisection(p, [df](double t) { return StudentTCdf(t, df); });
}

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double NormalQuantile(double p) {
  if (p == 0.5) return 0;
  if (p < 0.5) return -NormalQuantile(1 - p);
  return UpperQuantileByBisection(p, NormalCdf);
}

double WelchDegreesOfFreedom(double u, size_t n_a, double v, size_t n_b) {
  const double denominator =
      u * u / static_cast<double>(n_a - 1) + v * v / static_cast<double>(n_b - 1);
  if (denominator <= 0) return 0;
  return (u + v) * (u + v) / denominator;
}

absl::StatusOr<Interval> MeanInterval(const std::vector<double>& x, double confidence) {
  SYNCOPATE_RETURN_IF_ERROR(CheckConfidence(confidence));
  SYNCOPATE_RETURN_IF_ERROR(CheckSampleSize(x.size(), "the sample"));
  const SampleSummary s = Summarize(x);
  const double df = static_cast<double>(s.n - 1);
  const double half =
      StudentTQuantile((1 + confidence) / 2, df) * s.std_dev / std::sqrt(static_cast<double>(s.n));
  return Interval{s.mean, s.mean - half, s.mean + half, df};
}

absl::StatusOr<Interval> WelchDifferenceInterval(const std::vector<double>& a,
                                                 const std::vector<double>& b, double confidence) {
  SYNCOPATE_RETURN_IF_ERROR(CheckTwoSamples(a, b, confidence));
  const auto [mean_a, u] = MeanAndSquaredError(a);
  const auto [mean_b, v] = MeanAndSquaredError(b);
  const double difference = mean_a - mean_b;
  const double df = WelchDegreesOfFreedom(u, a.size(), v, b.size());
  if (df == 0) return Interval{difference, difference, difference, 0};
  const double half = StudentTQuantile((1 + confidence) / 2, df) * std::sqrt(u + v);
  return Interval{difference, difference - half, difference + half, df};
}

absl::StatusOr<Interval> FiellerRatioInterval(const std::vector<double>& a,
                                              const std::vector<double>& b, double confidence) {
  SYNCOPATE_RETURN_IF_ERROR(CheckTwoSamples(a, b, confidence));
  const auto [mean_a, u] = MeanAndSquaredError(a);
  const auto [mean_b, v] = MeanAndSquaredError(b);
  if (mean_b == 0) {
    return absl::FailedPreconditionError("a ratio needs a non-zero denominator mean");
  }
  const double ratio = mean_a / mean_b;
  // ā − R·b̄ has variance u + R²v; its degrees of freedom at the point estimate R = ā/b̄.
  const double df = WelchDegreesOfFreedom(u, a.size(), ratio * ratio * v, b.size());
  if (df == 0) return Interval{ratio, ratio, ratio, 0};
  const double t = StudentTQuantile((1 + confidence) / 2, df);
  // (ā − R b̄)² ≤ t²(u + R² v)  ⇔  A R² − 2 ā b̄ R + C ≤ 0, A = b̄² − t² v, C = ā² − t² u.
  const double quadratic = mean_b * mean_b - t * t * v;
  if (quadratic <= 0) return Interval{ratio, -kInfinity, kInfinity, df};
  // The discriminant over 4t²: u·A + ā²·v > 0 whenever A > 0, so the set is a bounded interval.
  const double root = t * std::sqrt(u * quadratic + mean_a * mean_a * v);
  return Interval{ratio, (mean_a * mean_b - root) / quadratic, (mean_a * mean_b + root) / quadratic,
                  df};
}

Verdict ReadVerdict(const Interval& interval, Direction direction, double bound) {
  if (direction == Direction::kAtMost) {
    if (interval.high <= bound) return Verdict::kMet;
    if (interval.low > bound) return Verdict::kNotMet;
    return Verdict::kUndecided;
  }
  if (interval.low >= bound) return Verdict::kMet;
  if (interval.high < bound) return Verdict::kNotMet;
  return Verdict::kUndecided;
}

std::string VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kMet:
      return "met";
    case Verdict::kNotMet:
      return "not met";
    case Verdict::kUndecided:
      return "undecided";
  }
  return "undecided";
}

}  // namespace syncopate::stats
