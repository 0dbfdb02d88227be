// The planted teachers' shared building blocks, internal to libs/datagen (pairs_teacher.cc,
// segment_teacher.cc and ctr_generator.cc include it; nothing outside the library should):
// randomness hashed from the teacher seed, the keyed hex encoding of values, the shape of the real
// Criteo columns, and the standardisation of a term over its sampling distribution. The hot
// helpers are inline, as they were when both teachers shared one file.
//
// Thread-safety: pure functions and constants.
#ifndef SYNCOPATE_LIBS_DATAGEN_TEACHER_MATH_H_
#define SYNCOPATE_LIBS_DATAGEN_TEACHER_MATH_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "libs/common/splitmix64.h"
#include "libs/data/criteo_reader.h"
#include "libs/datagen/teacher_config.h"

namespace syncopate::datagen {

using data::kCriteoCategorical;
using data::kCriteoNumeric;
using data::kMissingCategory;

// --- Deterministic randomness ---------------------------------------------------------------

// Distinct tags keep the hash streams of different kinds of weights apart.
enum HashTag : uint64_t {
  kValueTag = 1,
  kPairTag = 2,
  kNumericTag = 3,
  kHexTag = 4,
  kCalibrationTag = 5,
  // SegmentTeacher's.
  kSegmentHexTag = 6,
  kSegmentPriorTag = 7,
  kSegmentEffectTag = 8,
  kSegmentOffsetTag = 9,
  kChildTag = 10,
  kFmTag = 11,
  kNumericMissingTag = 12,
  kMissingEffectTag = 13,
  kSegmentValueTag = 14,
  kSegmentNumericTag = 15,
  kSegmentCalibrationTag = 16,
  kColdStartTag = 17,
  kNumericZeroTag = 18,
};

// The hash every weight comes from: SplitMix64 chained over the seed, the tag and the values.
template <typename... Ints>
inline uint64_t Hash(uint64_t seed, HashTag tag, Ints... values) {
  uint64_t h = DeriveSeed(seed, tag);
  ((h = SplitMix64(h ^ static_cast<uint64_t>(values))), ...);
  return h;
}

// (0, 1): 53 random bits, offset by half a step so log() never sees 0.
inline double OpenUnit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}
// [0, 1).
inline double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Box-Muller (cosine branch) on two 64-bit words.
inline double BoxMuller(uint64_t a, uint64_t b) {
  return std::sqrt(-2.0 * std::log(OpenUnit(a))) * std::cos(2.0 * std::numbers::pi * OpenUnit(b));
}
inline double Normal(std::mt19937_64& rng) {
  const uint64_t a = rng();
  return BoxMuller(a, rng());
}
// A standard normal that is a pure function of `h`: the weight of whatever `h` hashed.
inline double HashedNormal(uint64_t h) { return BoxMuller(h, SplitMix64(h)); }

// --- The hex encoding of values ----------------------------------------------------------------

// MurmurHash3's fmix32 and its inverse: a bijection on 32 bits, so a field's values never share a
// hex string and the teacher can map a string back to its rank.
inline constexpr uint32_t kFmixC1 = 0x85ebca6b;
inline constexpr uint32_t kFmixC2 = 0xc2b2ae35;
// The inverse of an odd number mod 2^32 by Newton's iteration (each step doubles the correct bits).
constexpr uint32_t InverseMod32(uint32_t c) {
  uint32_t inverse = c;
  for (int i = 0; i < 5; ++i) inverse *= 2 - c * inverse;
  return inverse;
}
static_assert(kFmixC1 * InverseMod32(kFmixC1) == 1 && kFmixC2 * InverseMod32(kFmixC2) == 1);

inline uint32_t Fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= kFmixC1;
  h ^= h >> 13;
  h *= kFmixC2;
  h ^= h >> 16;
  return h;
}
inline uint32_t InverseFmix32(uint32_t h) {
  h ^= h >> 16;
  h *= InverseMod32(kFmixC2);
  h ^= (h >> 13) ^ (h >> 26);
  h *= InverseMod32(kFmixC1);
  h ^= h >> 16;
  return h;
}

// --- The fixed shape of the teacher --------------------------------------------------------------

// Per-column missing rates and log-normal parameters, after the real Criteo data (I1 and I10 are
// missing for ~45% of rows, I12 for ~76%; C19/C20/C25/C26 for ~44%, C22 for ~76%).
inline constexpr std::array<double, kCriteoNumeric> kNumericMissing = {
    0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.76, 0.22};
inline constexpr std::array<double, kCriteoNumeric> kNumericMu = {0.5, 1.5, 2.0, 1.5, 7.0, 3.5, 1.5,
                                                                  2.5, 3.5, 0.3, 0.8, 0.3, 2.0};
inline constexpr std::array<double, kCriteoNumeric> kNumericSigma = {
    1.0, 1.8, 1.5, 1.0, 2.0, 1.5, 1.3, 1.0, 1.3, 0.6, 0.8, 1.0, 1.2};
inline constexpr double kNegativeI2 = 0.03;  // I2 = -1 this often, like the real column
inline constexpr std::array<double, kCriteoCategorical> kCategoricalMissing = {
    0.0, 0.0, 0.03, 0.03, 0.0, 0.12, 0.0,  0.0,  0.0,  0.0, 0.0,  0.03, 0.0,
    0.0, 0.0, 0.03, 0.0,  0.0, 0.44, 0.44, 0.03, 0.76, 0.0, 0.03, 0.44, 0.44};
// Cardinality rank of field f: (7 f + 3) mod 26 (7 is coprime to 26, so this is a permutation);
// it mixes small and large vocabularies across the columns as the real data does.
inline int CardinalityRank(int field) { return (7 * field + 3) % kCriteoCategorical; }
inline constexpr double kMaxNumeric =
    16777216.0;  // 2^24: every integer up to it is exact in a float
inline constexpr int kCalibrationSamples = 20000;

// The rank factor 1/sqrt(1 + (k - 1) / rare_rank) (1 for "missing", rank 0).
inline double RankFactor(int64_t rank, double rare_rank) {
  return rank <= 1 ? 1.0 : 1.0 / std::sqrt(1.0 + static_cast<double>(rank - 1) / rare_rank);
}

// The hex value of frequency rank `rank` under a field's key, and back: a keyed bijection, so a
// teacher recovers the rank from a written value. RankOfHex gives 0 for missing and -1 for a value
// outside 1..vocabulary (another teacher's, or a real file's).
inline uint64_t HexOfRank(uint32_t key, int64_t rank) {
  return Fmix32(static_cast<uint32_t>(rank) + key);
}
inline int64_t RankOfHex(uint32_t key, int64_t vocabulary, uint64_t value) {
  if (value == kMissingCategory) return 0;
  if (value > 0xffffffffULL) return -1;
  const int64_t rank = static_cast<uint32_t>(InverseFmix32(static_cast<uint32_t>(value)) - key);
  return rank >= 1 && rank <= vocabulary ? rank : -1;
}

// V_f: the 26 sizes spread log-uniformly from min_vocabulary to max_vocabulary, in the order of
// CardinalityRank.
int64_t VocabularySize(const CtrTeacherConfig& config, int field);

// The bias b with mean sigmoid(b + logit) = positive_rate over `logits`. The mean is increasing
// in b, so bisection converges; [-30, 30] brackets any sane rate.
double SolveBias(const std::vector<double>& logits, double positive_rate);

// Mean and standard deviation of a term from its first and second moments (a constant term gets
// standard deviation 1 so that dividing by it is harmless).
struct Moments {
  double sum = 0;
  double sum_squares = 0;
  void Add(double probability, double value) {
    sum += probability * value;
    sum_squares += probability * value * value;
  }
  double mean() const { return sum; }
  double stddev() const {
    const double variance = sum_squares - sum * sum;
    return variance > 1e-12 ? std::sqrt(variance) : 1.0;
  }
};

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_TEACHER_MATH_H_
