// The second planted CTR teacher (CtrTeacherKind::kSegments; ctr_generator.h writes its files).
#ifndef SYNCOPATE_LIBS_DATAGEN_SEGMENT_TEACHER_H_
#define SYNCOPATE_LIBS_DATAGEN_SEGMENT_TEACHER_H_

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "libs/data/criteo_reader.h"
#include "libs/datagen/teacher_config.h"
#include "libs/datagen/zipf_sampler.h"

namespace syncopate::datagen {

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
// kind, teacher_seed, positive_rate, signal_scale, zipf_exponent, min/max_vocabulary, rare_rank,
// numeric_scale (the numerics' term, 0.5 by default) and cold_start_scale (0 by default: a value's
// weight is its own; > 0 adds its field's shared cold-start effect, the more the rarer the value).
// LongTailTeacherConfig (teacher_config.h, `--teacher=longtail`) is this teacher with
// vocabularies up to 2e5, Zipf exponent 1.05, numeric_scale 1.5 (missingness and counts matter
// more), cold_start_scale 1 and signal_scale 0.22: Bayes AUC 0.787-0.791 on 50k-400k rows of
// teacher seed 1; in 400k rows its largest field has 53k distinct values, 49k of them seen fewer
// than 10 times, and 4.4% of all (row, field) values are such rare ones.
// HeavyTailTeacherConfig (`--teacher=heavytail`) is longtail whose present counts are also a
// structural 0 with probability numeric_zero_rate x f_j (0.35 x [0.1, 2)), independent of z,
// so the posterior above is unchanged and the counts look like a real click log's.
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
  // Standardises every term and solves the bias over a fixed Monte Carlo sample drawn from the
  // structure the constructor laid out (fields, vocabularies, segments, numerics).
  void Calibrate();
  int DrawFeatures(std::mt19937_64& rng, float* numeric, uint64_t* categorical) const;
  // Everything but the segment term and the bias.
  double ObservedLogit(const float* numeric, const uint64_t* categorical) const;
  double LogitGivenSegment(double observed, int segment) const;
  int64_t RankOf(int field, uint64_t value) const;
  uint64_t HexOf(int field, int64_t rank) const;
  double RawValueWeight(int field, int64_t rank) const;
  double RawFm(const std::array<int64_t, data::kCriteoCategorical>& ranks) const;
  double RawNumeric(int column, float x) const;
  // P(a present count of `column` is a structural 0): config_.numeric_zero_rate x f_column.
  double NumericZeroRate(int column) const;
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

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_SEGMENT_TEACHER_H_
