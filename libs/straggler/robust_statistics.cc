#include "libs/straggler/robust_statistics.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace syncopate {
namespace {

constexpr double kMadToSigma = 1.4826;  // 1/Φ⁻¹(0.75), see the header

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

double RobustSigma(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double centre = Median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double x : values) deviations.push_back(std::abs(x - centre));
  return kMadToSigma * Median(std::move(deviations));
}

namespace {

// f(ascending[i]), computed on demand (a log for the detector's log windows).
class Transformed {
 public:
  Transformed(absl::Span<const double> ascending, double (*f)(double))
      : values_(ascending), f_(f) {}
  double operator[](size_t i) const { return f_ == nullptr ? values_[i] : f_(values_[i]); }
  size_t size() const { return values_.size(); }

 private:
  absl::Span<const double> values_;
  double (*f_)(double);
};

// As Median: the middle value, or the mean of the two middle ones (lower + upper) / 2.
double SortedMedian(const Transformed& v) {
  const size_t mid = v.size() / 2;
  if (v.size() % 2 == 1) return v[mid];
  return (v[mid - 1] + v[mid]) / 2;
}

// The k-th smallest (0-based) of |v[i] − centre|. With p values below the centre, the deviations
// A_j = centre − v[p−1−j] (j < p) and B_j = v[p+j] − centre (j < n − p) are both ascending, and
// equal, bit for bit, to std::abs(v[i] − centre) (IEEE subtraction is sign-symmetric). The k+1
// smallest take i from A and k+1−i from B for the smallest i with B_{k−i} ≤ A_i.
double KthDeviation(const Transformed& v, double centre, size_t p, size_t k) {
  const size_t na = p, nb = v.size() - p;
  auto a = [&](size_t j) { return centre - v[p - 1 - j]; };
  auto b = [&](size_t j) { return v[p + j] - centre; };
  size_t lo = k + 1 > nb ? k + 1 - nb : 0;
  size_t hi = std::min(k + 1, na);
  while (lo < hi) {
    const size_t i = lo + (hi - lo) / 2;
    if (b(k - i) > a(i)) {
      lo = i + 1;
    } else {
      hi = i;
    }
  }
  const size_t from_b = k + 1 - lo;
  if (lo == 0) return b(from_b - 1);
  if (from_b == 0) return a(lo - 1);
  return std::max(a(lo - 1), b(from_b - 1));
}

}  // namespace

SortedSummary SummarizeSorted(absl::Span<const double> ascending, double (*f)(double)) {
  SortedSummary out;
  const Transformed v(ascending, f);
  const size_t n = v.size();
  if (n == 0) return out;
  out.median = SortedMedian(v);
  // p: how many values lie below the centre.
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < out.median) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const size_t mid = n / 2;
  const double mad =
      n % 2 == 1
          ? KthDeviation(v, out.median, lo, mid)
          : (KthDeviation(v, out.median, lo, mid - 1) + KthDeviation(v, out.median, lo, mid)) / 2;
  out.robust_sigma = kMadToSigma * mad;
  return out;
}

double MedianStandardError(double sigma, size_t n) {
  if (n == 0) return 0;
  return std::sqrt(std::numbers::pi / 2) * sigma / std::sqrt(static_cast<double>(n));
}

}  // namespace syncopate
