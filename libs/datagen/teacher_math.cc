#include "libs/datagen/teacher_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace syncopate::datagen {

int64_t VocabularySize(const CtrTeacherConfig& config, int field) {
  const double spread =
      std::log(static_cast<double>(config.max_vocabulary) / config.min_vocabulary);
  const double position = static_cast<double>(CardinalityRank(field)) / (kCriteoCategorical - 1);
  return std::clamp<int64_t>(std::llround(config.min_vocabulary * std::exp(spread * position)),
                             config.min_vocabulary, config.max_vocabulary);
}

double SolveBias(const std::vector<double>& logits, double positive_rate) {
  double low = -30, high = 30;
  for (int iteration = 0; iteration < 60; ++iteration) {
    const double mid = (low + high) / 2;
    double sum = 0;
    for (double logit : logits) sum += 1.0 / (1.0 + std::exp(-(mid + logit)));
    (sum / static_cast<double>(logits.size()) < positive_rate ? low : high) = mid;
  }
  return (low + high) / 2;
}

}  // namespace syncopate::datagen
