#include "libs/datagen/segment_teacher.h"

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

// Fields by cardinality rank (CardinalityRank; rank r has ~min * (max/min)^(r/25) values).
constexpr std::array<int, SegmentTeacher::kSegmentFields> kSegmentFieldRanks = {4,  7,  10,
                                                                                13, 16, 19};
constexpr std::array<std::array<int, 2>, SegmentTeacher::kParents> kHierarchyRanks = {
    {{22, 14}, {25, 17}, {21, 11}}};
constexpr std::array<int, SegmentTeacher::kFmFields> kFmFieldRanks = {0, 1,  2,  3,  5,  6,  8,
                                                                      9, 12, 14, 17, 19, 22, 25};
constexpr double kSegmentAffinity = 0.7;  // P(a segment field's rank is the segment's shift)
constexpr double kChildFollows = 0.85;    // P(a child value is its parent's hash)
// Per-column base missing rates (scaled per segment by 0.25..1.75) and log-normal parameters.
constexpr std::array<double, kCriteoNumeric> kSegmentNumericMissing = {
    0.3, 0.05, 0.2, 0.2, 0.05, 0.25, 0.05, 0.05, 0.05, 0.4, 0.1, 0.5, 0.2};
// Term scales in units of signal_scale, chosen so that the default signal_scale gives a Bayes
// AUC near 0.79 (the reference data): first-order fields, FM, segment; the numerics'
// is config.numeric_scale (0.5 by default).
constexpr double kSegmentFieldScale = 0.75;
constexpr double kSegmentFmScale = 2.0;
constexpr double kSegmentEffectScale = 1.6;

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

}  // namespace

SegmentTeacher::SegmentTeacher(const CtrTeacherConfig& config) : config_(config) {
  const uint64_t seed = config.teacher_seed;
  std::array<int, kCriteoCategorical> field_of_rank;
  zipf_.reserve(kCriteoCategorical);
  for (int f = 0; f < kCriteoCategorical; ++f) {
    field_of_rank[CardinalityRank(f)] = f;
    vocabulary_[f] = VocabularySize(config, f);
    hex_key_[f] = static_cast<uint32_t>(Hash(seed, kSegmentHexTag, f));
    zipf_.emplace_back(vocabulary_[f], config.zipf_exponent);
    zipf_norm_[f] = 0;
  }
  for (int i = 0; i < kSegmentFields; ++i) {
    const int f = field_of_rank[kSegmentFieldRanks[i]];
    segment_fields_[i] = f;
    // The exact Zipf normaliser of the segment fields (at most ~8300 terms with the defaults),
    // for their likelihoods.
    for (int64_t k = 1; k <= vocabulary_[f]; ++k) {
      zipf_norm_[f] += std::exp(-config.zipf_exponent * std::log(static_cast<double>(k)));
    }
    for (int z = 0; z < kSegments; ++z) {
      segment_offset_[i][z] =
          static_cast<int64_t>(Hash(seed, kSegmentOffsetTag, f, z) % vocabulary_[f]);
    }
  }
  for (int i = 0; i < kParents; ++i) {
    hierarchy_[i] = {field_of_rank[kHierarchyRanks[i][0]], field_of_rank[kHierarchyRanks[i][1]]};
  }
  for (int i = 0; i < kFmFields; ++i) fm_fields_[i] = field_of_rank[kFmFieldRanks[i]];
  std::array<double, kSegments> prior;
  double prior_sum = 0;
  for (int z = 0; z < kSegments; ++z) {
    prior[z] = std::exp(0.5 * HashedNormal(Hash(seed, kSegmentPriorTag, z)));
    prior_sum += prior[z];
  }
  for (int z = 0; z < kSegments; ++z) segment_log_prior_[z] = std::log(prior[z] / prior_sum);
  for (int j = 0; j < kCriteoNumeric; ++j) {
    for (int z = 0; z < kSegments; ++z) {
      const double factor = 0.25 + 1.5 * OpenUnit(Hash(seed, kNumericMissingTag, j, z));
      numeric_missing_[j][z] = std::min(0.95, kSegmentNumericMissing[j] * factor);
    }
    numeric_alpha_[j] = 1.0 + OpenUnit(Hash(seed, kSegmentNumericTag, j));
    missing_effect_[j] = 1.5 * HashedNormal(Hash(seed, kMissingEffectTag, j));
    log_mean_[j] = 0;
    log_std_[j] = 1;
    numeric_offset_[j] = 0;
    numeric_scale_[j] = 0;
  }
  value_offset_.fill(0);
  value_scale_.fill(0);

  Calibrate();
}

void SegmentTeacher::Calibrate() {
  const CtrTeacherConfig& config = config_;
  const uint64_t seed = config.teacher_seed;
  // Standardise every term over a fixed Monte Carlo sample (the segment fields' and children's
  // value distributions are mixtures, so moments in closed form would be long for no gain).
  std::mt19937_64 rng(Hash(seed, kSegmentCalibrationTag));
  std::vector<std::array<float, kCriteoNumeric>> numeric(kCalibrationSamples);
  std::vector<std::array<uint64_t, kCriteoCategorical>> categorical(kCalibrationSamples);
  std::vector<int> segment(kCalibrationSamples);
  for (int i = 0; i < kCalibrationSamples; ++i) {
    segment[i] = DrawFeatures(rng, numeric[i].data(), categorical[i].data());
  }
  for (int j = 0; j < kCriteoNumeric; ++j) {
    Moments logs;
    int present = 0;
    for (int i = 0; i < kCalibrationSamples; ++i) present += std::isnan(numeric[i][j]) ? 0 : 1;
    for (int i = 0; i < kCalibrationSamples; ++i) {
      if (!std::isnan(numeric[i][j])) {
        logs.Add(1.0 / std::max(present, 1), std::log1p(std::max(0.0f, numeric[i][j])));
      }
    }
    log_mean_[j] = logs.mean();
    log_std_[j] = logs.stddev();
    Moments term;
    for (int i = 0; i < kCalibrationSamples; ++i) {
      term.Add(1.0 / kCalibrationSamples, RawNumeric(j, numeric[i][j]));
    }
    const uint64_t h = Hash(seed, kSegmentNumericTag, j, 1);
    const double magnitude = 0.5 + OpenUnit(SplitMix64(h));
    numeric_offset_[j] = term.mean();
    numeric_scale_[j] = (h & 1 ? 1.0 : -1.0) * magnitude * config.signal_scale *
                        config.numeric_scale / term.stddev();
  }
  Moments fm;
  std::array<Moments, kCriteoCategorical> values;
  for (int i = 0; i < kCalibrationSamples; ++i) {
    std::array<int64_t, kCriteoCategorical> ranks;
    for (int f = 0; f < kCriteoCategorical; ++f) {
      ranks[f] = RankOf(f, categorical[i][f]);
      values[f].Add(1.0 / kCalibrationSamples, RawValueWeight(f, ranks[f]));
    }
    fm.Add(1.0 / kCalibrationSamples, RawFm(ranks));
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    const double field_scale = 0.3 + 0.7 * std::fmod(0.618033988749895 * (f + 1), 1.0);
    value_offset_[f] = values[f].mean();
    value_scale_[f] = config.signal_scale * kSegmentFieldScale * field_scale / values[f].stddev();
  }
  fm_offset_ = fm.mean();
  fm_scale_ = config.signal_scale * kSegmentFmScale / fm.stddev();
  Moments effect;
  for (int z = 0; z < kSegments; ++z) {
    effect.Add(std::exp(segment_log_prior_[z]), HashedNormal(Hash(seed, kSegmentEffectTag, z)));
  }
  for (int z = 0; z < kSegments; ++z) {
    segment_effect_[z] = config.signal_scale * kSegmentEffectScale *
                         (HashedNormal(Hash(seed, kSegmentEffectTag, z)) - effect.mean()) /
                         effect.stddev();
  }

  // The bias: mean p(click | x, z) = positive_rate over the sample, by bisection.
  std::vector<double> logits(kCalibrationSamples);
  for (int i = 0; i < kCalibrationSamples; ++i) {
    logits[i] =
        ObservedLogit(numeric[i].data(), categorical[i].data()) + segment_effect_[segment[i]];
  }
  bias_ = SolveBias(logits, config.positive_rate);
}

uint64_t SegmentTeacher::HexOf(int field, int64_t rank) const {
  return HexOfRank(hex_key_[field], rank);
}

int64_t SegmentTeacher::RankOf(int field, uint64_t value) const {
  return RankOfHex(hex_key_[field], vocabulary_[field], value);
}

double SegmentTeacher::RawValueWeight(int field, int64_t rank) const {
  if (rank < 0) return 0;
  const double factor = RankFactor(rank, config_.rare_rank);
  const double own =
      factor * HashedNormal(Hash(config_.teacher_seed, kSegmentValueTag, field, rank));
  // Rank 0 ("missing") has factor 1, so it gets no cold-start share; scale 0 skips the hash.
  if (config_.cold_start_scale == 0) return own;
  return own + config_.cold_start_scale * (1 - factor) *
                   HashedNormal(Hash(config_.teacher_seed, kColdStartTag, field));
}

double SegmentTeacher::RawFm(const std::array<int64_t, kCriteoCategorical>& ranks) const {
  // sum_(f<g) <v_f, v_g> = 1/2 (|sum v|^2 - sum |v|^2); missing and foreign values have v = 0.
  std::array<double, kFmRank> sum{};
  double squares = 0;
  for (const int f : fm_fields_) {
    if (ranks[f] < 1) continue;
    const double factor = RankFactor(ranks[f], config_.rare_rank);
    for (int d = 0; d < kFmRank; ++d) {
      const double v = factor * HashedNormal(Hash(config_.teacher_seed, kFmTag, f, ranks[f], d));
      sum[d] += v;
      squares += v * v;
    }
  }
  double total = 0;
  for (double x : sum) total += x * x;
  return 0.5 * (total - squares);
}

double SegmentTeacher::NumericZeroRate(int column) const {
  const double factor = 0.1 + 1.9 * OpenUnit(Hash(config_.teacher_seed, kNumericZeroTag, column));
  return std::min(0.9, config_.numeric_zero_rate * factor);
}

double SegmentTeacher::RawNumeric(int column, float x) const {
  if (std::isnan(x)) return missing_effect_[column];
  const double t =
      (std::log1p(std::max(0.0, static_cast<double>(x))) - log_mean_[column]) / log_std_[column];
  return std::clamp(t, -3.0, 3.0);
}

double SegmentTeacher::ZipfProbability(int field, int64_t rank) const {
  return std::exp(-config_.zipf_exponent * std::log(static_cast<double>(rank))) / zipf_norm_[field];
}

double SegmentTeacher::ObservedLogit(const float* numeric, const uint64_t* categorical) const {
  std::array<int64_t, kCriteoCategorical> ranks;
  double logit = 0;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ranks[f] = RankOf(f, categorical[f]);
    if (ranks[f] >= 0) logit += value_scale_[f] * (RawValueWeight(f, ranks[f]) - value_offset_[f]);
  }
  logit += fm_scale_ * (RawFm(ranks) - fm_offset_);
  for (int j = 0; j < kCriteoNumeric; ++j) {
    logit += numeric_scale_[j] * (RawNumeric(j, numeric[j]) - numeric_offset_[j]);
  }
  return logit;
}

double SegmentTeacher::LogitGivenSegment(double observed, int segment) const {
  return bias_ + observed + segment_effect_[segment];
}

std::array<double, SegmentTeacher::kSegments> SegmentTeacher::SegmentPosterior(
    const float* numeric, const uint64_t* categorical) const {
  // log P(z) + sum over segment fields of log P(value | z) + sum over numerics of
  // log P(missing or not | z); the other features do not depend on z.
  std::array<double, kSegments> log_post = segment_log_prior_;
  for (int i = 0; i < kSegmentFields; ++i) {
    const int f = segment_fields_[i];
    const int64_t k = RankOf(f, categorical[f]);
    if (k < 1) continue;  // missing (independent of z) or foreign
    const int64_t v = vocabulary_[f];
    const double plain = ZipfProbability(f, k);
    for (int z = 0; z < kSegments; ++z) {
      // The shifted draw maps Zipf rank r to 1 + (r - 1 + offset) mod V.
      const int64_t r = 1 + ((k - 1 - segment_offset_[i][z]) % v + v) % v;
      log_post[z] +=
          std::log(kSegmentAffinity * ZipfProbability(f, r) + (1 - kSegmentAffinity) * plain);
    }
  }
  for (int j = 0; j < kCriteoNumeric; ++j) {
    const bool missing = std::isnan(numeric[j]);
    for (int z = 0; z < kSegments; ++z) {
      log_post[z] += std::log(missing ? numeric_missing_[j][z] : 1 - numeric_missing_[j][z]);
    }
  }
  const double top = *std::max_element(log_post.begin(), log_post.end());
  double sum = 0;
  for (double& x : log_post) sum += (x = std::exp(x - top));
  for (double& x : log_post) x /= sum;
  return log_post;
}

double SegmentTeacher::Probability(const float* numeric, const uint64_t* categorical) const {
  const double observed = ObservedLogit(numeric, categorical);
  const std::array<double, kSegments> posterior = SegmentPosterior(numeric, categorical);
  double p = 0;
  for (int z = 0; z < kSegments; ++z) p += posterior[z] * Sigmoid(LogitGivenSegment(observed, z));
  return p;
}

int SegmentTeacher::DrawFeatures(std::mt19937_64& rng, float* numeric,
                                 uint64_t* categorical) const {
  // The segment, by inversion of its prior.
  int segment = kSegments - 1;
  double u = Uniform(rng);
  for (int z = 0; z < kSegments - 1; ++z) {
    u -= std::exp(segment_log_prior_[z]);
    if (u < 0) {
      segment = z;
      break;
    }
  }
  std::array<int64_t, kCriteoCategorical> ranks;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ranks[f] = Uniform(rng) < kCategoricalMissing[f] ? 0 : zipf_[f].Sample(rng);
  }
  for (int i = 0; i < kSegmentFields; ++i) {
    const int f = segment_fields_[i];
    if (ranks[f] >= 1 && Uniform(rng) < kSegmentAffinity) {
      ranks[f] = 1 + (ranks[f] - 1 + segment_offset_[i][segment]) % vocabulary_[f];
    }
  }
  for (const auto& [parent, child] : hierarchy_) {
    if (ranks[parent] >= 1 && ranks[child] >= 1 && Uniform(rng) < kChildFollows) {
      ranks[child] =
          1 + static_cast<int64_t>(Hash(config_.teacher_seed, kChildTag, parent, ranks[parent]) %
                                   vocabulary_[child]);
    }
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    categorical[f] = ranks[f] == 0 ? kMissingCategory : HexOf(f, ranks[f]);
  }
  const double activity = Normal(rng);
  for (int j = 0; j < kCriteoNumeric; ++j) {
    if (Uniform(rng) < numeric_missing_[j][segment]) {
      numeric[j] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const double log_count =
        kNumericMu[j] + kNumericSigma[j] * (0.6 * activity + 0.8 * Normal(rng));
    // A Pareto(alpha) factor U^(-1/alpha): power-law tails on top of the log-normal body.
    const double pareto = std::exp(-std::log(1.0 - Uniform(rng)) / numeric_alpha_[j]);
    numeric[j] =
        static_cast<float>(std::min(std::floor(std::exp(log_count) * pareto), kMaxNumeric));
    // Drawn only when asked, so the other teachers' streams (and their files) stay as they were.
    if (config_.numeric_zero_rate > 0 && Uniform(rng) < NumericZeroRate(j)) numeric[j] = 0;
  }
  return segment;
}

double SegmentTeacher::Sample(std::mt19937_64& rng, float* numeric, uint64_t* categorical,
                              double* bayes) const {
  const int segment = DrawFeatures(rng, numeric, categorical);
  const double observed = ObservedLogit(numeric, categorical);
  const std::array<double, kSegments> posterior = SegmentPosterior(numeric, categorical);
  double p = 0;
  for (int z = 0; z < kSegments; ++z) p += posterior[z] * Sigmoid(LogitGivenSegment(observed, z));
  *bayes = p;
  return Sigmoid(LogitGivenSegment(observed, segment));
}

}  // namespace syncopate::datagen
