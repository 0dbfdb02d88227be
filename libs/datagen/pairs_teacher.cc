#include "libs/datagen/pairs_teacher.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "libs/common/splitmix64.h"
#include "libs/datagen/teacher_math.h"

namespace syncopate::datagen {

namespace {

// Interactions between fields of these cardinality ranks (5..~700 values with the defaults).
constexpr std::array<std::array<int, 2>, 5> kInteractionRanks = {
    {{1, 6}, {3, 9}, {5, 12}, {8, 13}, {2, 11}}};

// Zipf(n, exponent) probabilities of ranks 1..min(n, kMaxNormalizedRanks), normalised over those.
// Beyond that many ranks the rank factor leaves a value's weight so small, and the Zipf mass so
// thin, that ignoring the tail changes a term's variance negligibly (with the defaults, by less
// than 1e-5 of it). It bounds the constructor's work when max_vocabulary is huge.
constexpr int64_t kMaxNormalizedRanks = 131072;
constexpr int64_t kMaxNormalizedPairRanks = 2048;

std::vector<double> ZipfProbabilities(int64_t n, double exponent, int64_t cap) {
  std::vector<double> p(static_cast<size_t>(std::min(n, cap)));
  double sum = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    p[k] = std::exp(-exponent * std::log(static_cast<double>(k + 1)));
    sum += p[k];
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

CtrTeacher::CtrTeacher(const CtrTeacherConfig& config) : config_(config) {
  const uint64_t seed = config.teacher_seed;
  std::vector<std::vector<double>> probabilities(kCriteoCategorical);
  zipf_.reserve(kCriteoCategorical);
  for (int f = 0; f < kCriteoCategorical; ++f) {
    vocabulary_[f] = VocabularySize(config, f);
    hex_key_[f] = static_cast<uint32_t>(Hash(seed, kHexTag, f));
    zipf_.emplace_back(vocabulary_[f], config.zipf_exponent);
    probabilities[f] = ZipfProbabilities(vocabulary_[f], config.zipf_exponent, kMaxNormalizedRanks);

    // Standardise the field's term over the sampling distribution (missing with probability m,
    // else rank k with probability (1 - m) p_k), then give it standard deviation signal_scale *
    // s_f. The terms of independent fields add, so the logit's spread, and with it the Bayes
    // AUC, hardly depends on the seed.
    const double missing = kCategoricalMissing[f];
    Moments moments;
    moments.Add(missing, RawValueWeight(f, 0));
    for (size_t k = 0; k < probabilities[f].size(); ++k) {
      moments.Add((1 - missing) * probabilities[f][k],
                  RawValueWeight(f, static_cast<int64_t>(k + 1)));
    }
    // Golden-ratio steps spread the 26 scales evenly over [0.3, 1] in no particular order.
    const double field_scale = 0.3 + 0.7 * std::fmod(0.618033988749895 * (f + 1), 1.0);
    value_offset_[f] = moments.mean();
    value_scale_[f] = config.signal_scale * field_scale / moments.stddev();
  }

  std::array<int, kCriteoCategorical> field_of_rank;
  for (int f = 0; f < kCriteoCategorical; ++f) field_of_rank[CardinalityRank(f)] = f;
  for (int i = 0; i < config.num_interactions; ++i) {
    const int f = field_of_rank[kInteractionRanks[i][0]];
    const int g = field_of_rank[kInteractionRanks[i][1]];
    interactions_[i] = {f, g};
    // The pair's raw term is 0 when either side is missing (or foreign), so only present pairs
    // are summed; the missing mass adds 0 to both moments.
    Moments moments;
    const int64_t ranks_f = std::min<int64_t>(vocabulary_[f], kMaxNormalizedPairRanks);
    const int64_t ranks_g = std::min<int64_t>(vocabulary_[g], kMaxNormalizedPairRanks);
    const double present = (1 - kCategoricalMissing[f]) * (1 - kCategoricalMissing[g]);
    for (int64_t a = 1; a <= ranks_f; ++a) {
      for (int64_t b = 1; b <= ranks_g; ++b) {
        moments.Add(present * probabilities[f][a - 1] * probabilities[g][b - 1],
                    RawPairWeight(f, a, g, b));
      }
    }
    pair_offset_[i] = moments.mean();
    pair_scale_[i] = config.signal_scale * config.interaction_scale / moments.stddev();
  }

  // The numeric terms and the bias come from a fixed Monte Carlo sample of the features.
  std::mt19937_64 rng(Hash(seed, kCalibrationTag));
  std::vector<std::array<float, kCriteoNumeric>> numeric(kCalibrationSamples);
  std::vector<std::array<uint64_t, kCriteoCategorical>> categorical(kCalibrationSamples);
  for (int i = 0; i < kCalibrationSamples; ++i) {
    DrawFeatures(rng, numeric[i].data(), categorical[i].data());
  }
  for (int j = 0; j < kCriteoNumeric; ++j) {
    Moments moments;
    for (int i = 0; i < kCalibrationSamples; ++i) {
      moments.Add(1.0 / kCalibrationSamples, NumericFeature(numeric[i][j]));
    }
    // beta_j: a random sign and a magnitude in [0.5, 1.5), in units of the column's spread.
    const uint64_t h = Hash(seed, kNumericTag, j);
    const double magnitude = 0.5 + OpenUnit(SplitMix64(h));
    numeric_offset_[j] = moments.mean();
    beta_[j] = (h & 1 ? 1.0 : -1.0) * magnitude * config.signal_scale * config.numeric_scale /
               moments.stddev();
  }

  // The bias: mean sigmoid(bias + logit) = positive_rate over the sample.
  std::vector<double> logits(kCalibrationSamples);
  for (int i = 0; i < kCalibrationSamples; ++i) {
    logits[i] = Logit(numeric[i].data(), categorical[i].data());
  }
  bias_ = SolveBias(logits, config.positive_rate);
}

uint64_t CtrTeacher::HexOf(int field, int64_t rank) const {
  return HexOfRank(hex_key_[field], rank);
}

int64_t CtrTeacher::RankOf(int field, uint64_t value) const {
  return RankOfHex(hex_key_[field], vocabulary_[field], value);
}

double CtrTeacher::RawValueWeight(int field, int64_t rank) const {
  return RankFactor(rank, config_.rare_rank) *
         HashedNormal(Hash(config_.teacher_seed, kValueTag, field, rank));
}

double CtrTeacher::RawPairWeight(int f, int64_t rank_f, int g, int64_t rank_g) const {
  return RankFactor(rank_f, config_.rare_rank) * RankFactor(rank_g, config_.rare_rank) *
         HashedNormal(Hash(config_.teacher_seed, kPairTag, f, rank_f, g, rank_g));
}

double CtrTeacher::NumericFeature(float x) {
  // NaN (missing) and negative values fail the comparison and count as 0.
  return x >= 0 ? std::log1p(static_cast<double>(x)) : 0.0;
}

double CtrTeacher::Logit(const float* numeric, const uint64_t* categorical) const {
  double logit = 0;
  std::array<int64_t, kCriteoCategorical> ranks;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ranks[f] = RankOf(f, categorical[f]);
    if (ranks[f] >= 0) logit += value_scale_[f] * (RawValueWeight(f, ranks[f]) - value_offset_[f]);
  }
  for (int i = 0; i < config_.num_interactions; ++i) {
    const auto [f, g] = interactions_[i];
    const double raw =
        ranks[f] >= 1 && ranks[g] >= 1 ? RawPairWeight(f, ranks[f], g, ranks[g]) : 0.0;
    logit += pair_scale_[i] * (raw - pair_offset_[i]);
  }
  for (int j = 0; j < kCriteoNumeric; ++j) {
    logit += beta_[j] * (NumericFeature(numeric[j]) - numeric_offset_[j]);
  }
  return logit;
}

double CtrTeacher::Probability(const float* numeric, const uint64_t* categorical) const {
  return 1.0 / (1.0 + std::exp(-(bias_ + Logit(numeric, categorical))));
}

void CtrTeacher::DrawFeatures(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const {
  for (int j = 0; j < kCriteoNumeric; ++j) {
    if (Uniform(rng) < kNumericMissing[j]) {
      numeric[j] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    if (j == 1 && Uniform(rng) < kNegativeI2) {
      numeric[j] = -1.0f;
      continue;
    }
    const double count = std::floor(std::exp(kNumericMu[j] + kNumericSigma[j] * Normal(rng)));
    numeric[j] = static_cast<float>(std::min(count, kMaxNumeric));
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    categorical[f] =
        Uniform(rng) < kCategoricalMissing[f] ? kMissingCategory : HexOf(f, zipf_[f].Sample(rng));
  }
}

double CtrTeacher::Sample(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const {
  DrawFeatures(rng, numeric, categorical);
  return Probability(numeric, categorical);
}

}  // namespace syncopate::datagen
