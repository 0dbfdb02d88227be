// Synthetic click-through-rate data with a known answer: a planted "teacher" model draws Criteo-
// format examples and their click probabilities, so a file comes with the best AUC and logloss
// any model can reach on it (the Bayes AUC / logloss), and a training run can be judged against
// that ceiling rather than against a guess.
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
// concurrently (each caller owns its rng). GenerateCtr has no shared state.
#ifndef SYNCOPATE_LIBS_DATAGEN_CTR_GENERATOR_H_
#define SYNCOPATE_LIBS_DATAGEN_CTR_GENERATOR_H_

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "libs/data/criteo_reader.h"

namespace syncopate::datagen {

// Which planted teacher draws the clicks (`syncopate datagen ctr --teacher=...`).
enum class CtrTeacherKind {
  kPairs,     // CtrTeacher above: independent fields, four planted pairwise interactions
  kSegments,  // SegmentTeacher below: latent segments, FM interactions, informative missingness
};

struct CtrTeacherConfig {
  CtrTeacherKind kind = CtrTeacherKind::kPairs;
  uint64_t teacher_seed = 1;
  double positive_rate = 0.25;  // the mean click probability the bias is solved for, in (0, 1)
  double signal_scale = 0.31;   // scales every term's spread: higher = larger Bayes AUC, >= 0
  double zipf_exponent = 1.15;  // value frequencies ~ rank^-zipf_exponent, > 0
  int64_t min_vocabulary = 3;   // smallest and largest field cardinality, 1 <= min <= max <= 2^31
  int64_t max_vocabulary = 100000;
  double rare_rank = 5;            // weights fall like 1/sqrt(1 + (k - 1) / rare_rank), > 0
  int num_interactions = 4;        // pairwise interaction terms, 0..5
  double interaction_scale = 1.0;  // an interaction term's std, in units of signal_scale, >= 0
  double numeric_scale = 0.5;      // a numeric term's typical std, in units of signal_scale, >= 0
};

// INVALID_ARGUMENT naming the first knob outside the range its comment gives.
absl::Status ValidateCtrTeacherConfig(const CtrTeacherConfig& config);

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

// The second planted teacher (kind kSegments), built so that models and defaults are not tuned
// to CtrTeacher's structure. Every example belongs to one of 8 latent segments z (never written;
// P(z) ~ exp(N/2) hashed), and
//
//   logit(x, z) = bias + sum_f W_f(c_f) + FM(x) + S(z) + sum_j N_j(I_j)
//
// * Vocabularies, Zipf ranks, hex values, missing rates and the rank factor of the weights are
//   CtrTeacher's (up to max_vocabulary, 1e5 by default); W_f as there.
// * Segments drive six fields (C cardinality ranks 4..19, 16..8300 values): with probability 0.7
//   a value's Zipf rank is shifted by a per-(field, segment) offset, so these fields are
//   correlated with each other and reveal the segment; S(z) adds a per-segment click effect.
// * Correlated fields: in three parent -> child pairs (a 19k-1e5-value field and a 290-3500-value
//   one) the child is a hash of the parent with probability 0.85, like an ad and its advertiser.
// * FM: 14 fields carry a rank-4 latent vector per value (hashed normals times the rank factor,
//   0 when missing) and FM(x) = sum_(f<g) <v_f, v_g>: 91 interacting pairs, none of them a
//   CtrTeacher pair. No model can list them as crosses; a factorisation model can learn them.
// * Numerics: heavy tailed, floor(exp(mu_j + sigma_j (0.6 a + 0.8 e_j)) U^(-1/alpha_j)) with a
//   shared activity a (so the columns are correlated), alpha_j in [1, 2) and a cap of 2^24. Each
//   column's missing rate depends on the segment, and a missing value has its own click effect:
//   missingness is informative. N_j = beta_j clamp(standardised log1p(I_j), -3, 3) when present.
// Each term is standardised over a 20000-example Monte Carlo sample, then scaled in units of
// signal_scale (fields 0.75 s_f, FM 2.0, segments 1.6, numerics 0.5 |beta|); the bias is solved
// for positive_rate as in CtrTeacher. Calibration (50k rows, sample seed 7): positive rate
// 0.242-0.254 and Bayes AUC 0.778-0.798 over teacher seeds 1-5 (0.791 for seed 1); the spread is
// wider than CtrTeacher's because a few frequent values carry much of the FM term. Knobs used:
// kind, teacher_seed, positive_rate, signal_scale, zipf_exponent, min/max_vocabulary, rare_rank
// (the others are CtrTeacher's).
//
// Labels are drawn from p(click | x, z), but z is latent: the Bayes-optimal prediction from the
// written features is p(click | x) = sum_z P(z | x) p(click | x, z), with P(z | x) from the six
// segment fields' and the numerics' missingness likelihoods (exact: both are known in closed
// form). GenerateCtr reports the AUC of that, the best any model can reach on the file.
//
// Thread-safety: immutable after construction; const methods are safe concurrently.
class SegmentTeacher {
 public:
  static constexpr int kSegments = 8;
  static constexpr int kSegmentFields = 6;
  static constexpr int kParents = 3;
  static constexpr int kFmFields = 14;
  static constexpr int kFmRank = 4;

  // `config` must pass ValidateCtrTeacherConfig.
  explicit SegmentTeacher(const CtrTeacherConfig& config);

  // Draws one example into numeric[13] and categorical[26]; returns p(click | x, z) for the label
  // and writes p(click | x) (Probability) into *bayes.
  double Sample(std::mt19937_64& rng, float* numeric, uint64_t* categorical, double* bayes) const;
  // p(click | x), z marginalised out. Foreign values contribute 0 and say nothing about z.
  double Probability(const float* numeric, const uint64_t* categorical) const;
  // P(z | x) for z in [0, kSegments).
  std::array<double, kSegments> SegmentPosterior(const float* numeric,
                                                 const uint64_t* categorical) const;

  int64_t vocabulary_size(int field) const { return vocabulary_[field]; }
  const std::array<int, kFmFields>& fm_fields() const { return fm_fields_; }
  const std::array<int, kSegmentFields>& segment_fields() const { return segment_fields_; }

 private:
  int DrawFeatures(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const;
  // Everything but the segment term and the bias.
  double ObservedLogit(const float* numeric, const uint64_t* categorical) const;
  double LogitGivenSegment(double observed, int segment) const;
  int64_t RankOf(int field, uint64_t value) const;
  uint64_t HexOf(int field, int64_t rank) const;
  double RawValueWeight(int field, int64_t rank) const;
  double RawFm(const std::array<int64_t, data::kCriteoCategorical>& ranks) const;
  double RawNumeric(int column, float x) const;
  double ZipfProbability(int field, int64_t rank) const;

  CtrTeacherConfig config_;
  std::array<int64_t, data::kCriteoCategorical> vocabulary_;
  std::array<uint32_t, data::kCriteoCategorical> hex_key_;
  std::vector<ZipfSampler> zipf_;
  std::array<double, data::kCriteoCategorical> zipf_norm_;  // sum_k k^-s over the field's ranks
  std::array<int, kSegmentFields> segment_fields_;
  std::array<std::array<int64_t, kSegments>, kSegmentFields> segment_offset_;
  std::array<std::array<int, 2>, kParents> hierarchy_;  // {parent, child}
  std::array<int, kFmFields> fm_fields_;
  std::array<double, kSegments> segment_log_prior_;
  std::array<double, kSegments> segment_effect_;  // S(z), standardised and scaled
  std::array<std::array<double, kSegments>, data::kCriteoNumeric> numeric_missing_;
  std::array<double, data::kCriteoNumeric> numeric_alpha_;
  std::array<double, data::kCriteoNumeric> log_mean_;  // of log1p(I_j) over present values
  std::array<double, data::kCriteoNumeric> log_std_;
  std::array<double, data::kCriteoNumeric> missing_effect_;  // raw N_j of a missing value
  std::array<double, data::kCriteoNumeric> numeric_offset_;
  std::array<double, data::kCriteoNumeric> numeric_scale_;
  std::array<double, data::kCriteoCategorical> value_offset_;
  std::array<double, data::kCriteoCategorical> value_scale_;
  double fm_offset_ = 0;
  double fm_scale_ = 0;
  double bias_ = 0;
};

// A stream whose key space grows without bound (the test of bounded embedding memory, ADR 0010):
// every `period_rows` rows, the values of a `fraction` of each field's vocabulary (picked by a
// fixed hash of the value, the same in every period) appear under new keys, as new ad, item and
// session ids replace old ones in a live click log and are never seen again. Labels, and the
// Bayes AUC, are those of the underlying values: a model has to learn each period's keys anew,
// and a test file written without churn holds those values under keys no training period used.
struct CtrKeyChurn {
  int64_t period_rows = 0;  // 0 = off: every value keeps its key
  double fraction = 0;      // of each field's values, in [0, 1]
};

struct CtrGenerationReport {
  int64_t rows;
  double positive_rate;  // of the drawn labels
  double bayes_auc;      // the teacher's p against the drawn labels (BinaryAuc)
  double bayes_logloss;  // likewise (LogLoss)
};

// Writes `rows` Criteo-format lines to `out_path` (gzip when it ends in ".gz", plain otherwise),
// atomically: a temporary file next to it, renamed into place once complete. The draws come from
// rng = std::mt19937_64(sample_seed): per row p = Sample(rng, ...), then label = 1 iff
// (rng() >> 11) * 2^-53 < p. So the same teacher and seed give the same file, and a test can
// replay it row by row. Train and
// test files come from one teacher_seed with different sample_seeds. With kind kSegments the rows
// come from SegmentTeacher::Sample likewise (label from p(click | x, z)), and bayes_auc /
// bayes_logloss are those of p(click | x).
//
// Memory: 8 bytes per row (each row's p and label, for the exact AUC) plus a 1 MiB buffer.
//
// `churn` renames keys as CtrKeyChurn says after the draws, so the rows and labels are those of
// the same seed without churn.
//
// Errors: INVALID_ARGUMENT for `rows` < 1 or a bad config or churn; the open/write errors of the
// file (NOT_FOUND when its directory does not exist, PERMISSION_DENIED, UNKNOWN).
absl::StatusOr<CtrGenerationReport> GenerateCtr(const CtrTeacherConfig& teacher,
                                                uint64_t sample_seed, int64_t rows,
                                                const std::string& out_path,
                                                const CtrKeyChurn& churn = {});

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_CTR_GENERATOR_H_
