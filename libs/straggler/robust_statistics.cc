#include "libs/straggler/robust_statistics.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace syncopate {

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
  constexpr double kMadToSigma = 1.4826;  // 1/Φ⁻¹(0.75), see the header
  const double centre = Median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double x : values) deviations.push_back(std::abs(x - centre));
  return kMadToSigma * Median(std::move(deviations));
}

double MedianStandardError(double sigma, size_t n) {
  if (n == 0) return 0;
  return std::sqrt(std::numbers::pi / 2) * sigma / std::sqrt(static_cast<double>(n));
}

}  // namespace syncopate
