#include "libs/datagen/zipf_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "libs/datagen/teacher_math.h"

namespace syncopate::datagen {

namespace {
// log1p(x) / x and expm1(x) / x, continued smoothly through x = 0.
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}
}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double exponent) : n_(n), exponent_(exponent) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

// h(x) = x^-exponent, the unnormalised density.
double ZipfSampler::H(double x) const { return std::exp(-exponent_ * std::log(x)); }

// An antiderivative of h: (x^(1-e) - 1) / (1 - e), or log x at e = 1.
double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // rounding can push it just past the domain
  return std::exp(Log1pOverX(t) * x);
}

int64_t ZipfSampler::Sample(std::mt19937_64& rng) const {
  while (true) {
    // Uniform over (h_integral_x1_, h_integral_n_]: inverting HIntegral maps it to a continuous
    // x whose density dominates the discrete probabilities; k = round(x) is accepted when it
    // falls under the step of the true probability mass.
    const double u = h_integral_n_ + Uniform(rng) * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    // Any candidate k is exact (the test below accepts or rejects it), and llround would change
    // a persisted data set for no gain.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(x + 0.5), 1, n_);
    if (static_cast<double>(k) - x <= s_ || u >= HIntegral(static_cast<double>(k) + 0.5) - H(k)) {
      return k;
    }
  }
}

}  // namespace syncopate::datagen
