// The knobs of the planted CTR teachers (`syncopate datagen ctr`), shared by both teachers:
// pairs_teacher.h and segment_teacher.h say what each does with them.
//
// Thread-safety: plain values and a pure function.
#ifndef SYNCOPATE_LIBS_DATAGEN_TEACHER_CONFIG_H_
#define SYNCOPATE_LIBS_DATAGEN_TEACHER_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"

namespace syncopate::datagen {

// Which planted teacher draws the clicks (`syncopate datagen ctr --teacher=...`).
enum class CtrTeacherKind {
  kPairs,  // CtrTeacher (pairs_teacher.h): independent fields, four planted pairwise interactions
  kSegments,  // SegmentTeacher (segment_teacher.h): latent segments, FM interactions, informative
              // missingness
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
  // SegmentTeacher only: how much of a value's weight is its field's shared cold-start effect
  // c_f, the more the rarer the value (weight = r_k N_fk + cold_start_scale (1 - r_k) c_f with
  // r_k the rank factor). 0 (the segments teacher): rare values carry little signal, each its
  // own. > 0: a value seen a handful of times says "rare value of this field", as new ads and
  // users click differently from established ones; finite, >= 0.
  double cold_start_scale = 0;
  // SegmentTeacher only: zero-inflated counts, as in real click logs (most of Criteo's integer
  // columns are 0 for a large share of rows: no click, no view, nothing yet). A present count is
  // a structural 0 with probability numeric_zero_rate x f_j, f_j in [0.1, 2) per column (hashed,
  // at most 0.9), drawn independently of the segment. 0 (every teacher but heavytail): counts
  // are zero only by rounding; in [0, 1).
  double numeric_zero_rate = 0;
};

// The third teacher (`--teacher=longtail`), for click logs nobody here tuned to: the segments
// teacher (latent segments, FM, informative missingness, heavy-tailed numerics, parent/child
// fields) with vocabularies up to 2e5 values, flatter Zipf tails (exponent 1.05: in 400k rows
// most of a large field's values are seen fewer than 10 times) and a cold-start effect shared by
// each field's rare values. signal_scale puts its Bayes AUC near 0.79, like the others'.
CtrTeacherConfig LongTailTeacherConfig(uint64_t teacher_seed);

// The fourth teacher (`--teacher=heavytail`): longtail with zero-inflated counts
// (numeric_zero_rate 0.35: 0 for ~35% of present values on average, 4-63% per column), so the
// numeric columns look like a real click log's: mostly 0 or small, with log-normal bodies and
// Pareto tails to 10^6+ (issue 45 measured the cost of such columns in DeepFM's FM on a log
// nobody here generated: ADR 0020).
CtrTeacherConfig HeavyTailTeacherConfig(uint64_t teacher_seed);

// INVALID_ARGUMENT naming the first knob outside the range its comment gives.
absl::Status ValidateCtrTeacherConfig(const CtrTeacherConfig& config);

}  // namespace syncopate::datagen

#endif  // SYNCOPATE_LIBS_DATAGEN_TEACHER_CONFIG_H_
