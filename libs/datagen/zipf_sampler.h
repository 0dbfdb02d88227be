// Zipf-distributed ranks for the planted teachers' categorical values, in O(1) without a table.
//
// Thread-safety: immutable after construction; Sample is safe concurrently (each caller owns its
// rng).
#ifndef SYNCOPATE_LIBS_DATAGEN_ZIPF_SAMPLER_H_
#define SYNCOPATE_LIBS_DATAGEN_ZIPF_SAMPLER_H_

#include <cstdint>
#include <random>

namespace syncopate::datagen {

// Zipf(n, exponent) on 1..n by rejection-inversion (Hormann & Derflinger 1996, "Rejection-inversion
// to generate variates from monotone discrete distributions"; the form of Apache Commons' sampler):
// O(1) expected time and no table, whatever n.
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double exponent);
  int64_t Sample(std::mt19937_64& rng) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  int64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_ZIPF_SAMPLER_H_
