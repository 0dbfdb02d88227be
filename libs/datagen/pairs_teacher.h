// The first planted CTR teacher (CtrTeacherKind::kPairs; ctr_generator.h writes its files):
// independent fields plus four planted pairwise interactions.
//
// The teacher (all weights are hashes of teacher_seed, never stored tables):
//
//   logit(x) = bias + sum_f W_f(c_f) + sum_(f,g) in P  W_fg(c_f, c_g) + sum_j beta_j L_j(I_j)
//   p(click | x) = sigmoid(logit(x))
//
// * Categorical fields C1..C26: field f has V_f values, the 26 sizes spread log-uniformly from
//   min_vocabulary (3) to max_vocabulary (1e5) in a fixed shuffled order. A value is drawn by its
//   frequency rank k in 1..V_f with Zipf probabilities ~ k^-zipf_exponent (1.15), and written as
//   8 lowercase hex digits: a keyed 32-bit bijection of k (distinct values never share a hex
//   string, and the teacher recovers k from it). Each field is missing with a per-field
//   probability (0-76%, the real data's pattern); "missing" is a value with its own weight.
// * W_f(k) is a hashed standard normal N(seed, f, k) times the rank factor
//   1 / sqrt(1 + (k - 1) / rare_rank), so rare values carry small weights and nearly all the signal
//   sits in values seen hundreds of times in 500k rows (otherwise no trained model could approach
//   the Bayes AUC). The field's term is then standardised over the sampling distribution to mean 0
//   and standard deviation signal_scale * s_f, with per-field scales s_f spread over [0.3, 1].
// * P: num_interactions (4) pairs of low/mid-cardinality fields (with the defaults C23 x C20,
//   C1 x C13, C5 x C6, C24 x C21: 5 to 675 values) with hashed normal weights N(seed, f, k_f,
//   g, k_g) times both rank factors, 0 when a side is missing; standardised to standard deviation
//   signal_scale * interaction_scale. A model without crosses cannot learn these.
// * Numeric I1..I13: log-normal counts floor(exp(mu_j + sigma_j z)) capped at 2^24 (exact in a
//   float); I2 is -1 with probability 3% like the real I2; each column is missing with a
//   per-column probability (0-76%). L_j = log1p(max(I_j, 0)), 0 when missing, standardised;
//   beta_j has a hashed sign and magnitude in [0.5, 1.5) times signal_scale * numeric_scale.
// * bias is solved at construction (bisection over a fixed 20000-example Monte Carlo sample) so the
//   mean click probability is positive_rate.
// Because every term is standardised and the fields are drawn independently, the logit's spread,
// and so the Bayes AUC, barely depends on teacher_seed.
//
// Calibration (200k-row test files, rare_rank 30): positive rate 0.246-0.253 and Bayes AUC
// 0.796-0.808 over teacher seeds 1-7 (0.800 for seed 1; real Criteo models reach ~0.80). The
// default rare_rank is 5: with 30, values seen a handful of times in 400k rows carried enough
// signal that wide & deep plateaued 0.026 below the Bayes AUC however long it trained (0.776 vs
// 0.802, 400k rows, 5 epochs); with 5 the Bayes AUC is unchanged (0.801 on 400k rows, 0.802 on
// 50k) and examples/ctr_wdl.textproto (wide part given the four crosses, 3 epochs of 400k rows)
// reaches 0.795. Without the crosses it plateaus at ~0.775: a model must be told about (or
// learn) the interactions.
//
// Randomness is std::mt19937_64 driven through our own uniform and normal transforms, not
// <random>'s distributions (their algorithms differ between standard libraries), so a seed gives
// the same file wherever libm rounds exp/log/cos alike.
//
// Thread-safety: CtrTeacher is immutable after construction; its const methods are safe to call
// concurrently (each caller owns its rng).
#ifndef SYNCOPATE_LIBS_DATAGEN_PAIRS_TEACHER_H_
#define SYNCOPATE_LIBS_DATAGEN_PAIRS_TEACHER_H_

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "libs/data/criteo_reader.h"
#include "libs/datagen/teacher_config.h"
#include "libs/datagen/zipf_sampler.h"

namespace syncopate::datagen {

class CtrTeacher {
 public:
  // `config` must pass ValidateCtrTeacherConfig.
  explicit CtrTeacher(const CtrTeacherConfig& config);

  // Draws one example's features into numeric[13] and categorical[26] (as data::CtrDataset stores
  // them: NaN / data::kMissingCategory for missing) from `rng`, and returns the teacher's click
  // probability for them (exactly Probability(numeric, categorical)).
  double Sample(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const;

  // The click probability of an example. Categorical values the teacher never produces (from
  // another teacher_seed or a real file) contribute 0.
  double Probability(const float* numeric, const uint64_t* categorical) const;

  // V_f of categorical field `field` in [0, 26).
  int64_t vocabulary_size(int field) const { return vocabulary_[field]; }
  double bias() const { return bias_; }

 private:
  double Logit(const float* numeric, const uint64_t* categorical) const;
  void DrawFeatures(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const;
  // Frequency rank k in 1..V_f of a hex value of field f; 0 for missing, -1 for a foreign value.
  int64_t RankOf(int field, uint64_t value) const;
  uint64_t HexOf(int field, int64_t rank) const;
  // The unstandardised terms: rank factor(s) times a hashed standard normal.
  double RawValueWeight(int field, int64_t rank) const;
  double RawPairWeight(int f, int64_t rank_f, int g, int64_t rank_g) const;
  // log1p(x) for a present, non-negative count; 0 otherwise.
  static double NumericFeature(float x);

  CtrTeacherConfig config_;
  std::array<int64_t, data::kCriteoCategorical> vocabulary_;
  std::array<uint32_t, data::kCriteoCategorical> hex_key_;
  std::vector<ZipfSampler> zipf_;  // one per categorical field
  // Term = scale * (raw - offset): each term has mean 0 and its configured standard deviation
  // under the sampling distribution.
  std::array<double, data::kCriteoCategorical> value_offset_;
  std::array<double, data::kCriteoCategorical> value_scale_;
  std::array<std::array<int, 2>, 5> interactions_;
  std::array<double, 5> pair_offset_;
  std::array<double, 5> pair_scale_;
  std::array<double, data::kCriteoNumeric> numeric_offset_;
  std::array<double, data::kCriteoNumeric> beta_;
  double bias_ = 0;
};

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_PAIRS_TEACHER_H_
