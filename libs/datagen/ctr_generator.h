// Synthetic click-through-rate data with a known answer: a planted "teacher" model draws Criteo-
// format examples and their click probabilities, so a file comes with the best AUC and logloss
// any model can reach on it (the Bayes AUC / logloss), and a training run can be judged against
// that ceiling rather than against a guess. Two teachers: CtrTeacher (pairs_teacher.h: independent
// fields and planted pairwise interactions) and SegmentTeacher (segment_teacher.h: latent
// segments, FM interactions, informative missingness), both configured by CtrTeacherConfig
// (teacher_config.h), which also names a third configuration of SegmentTeacher, the long-tail
// teacher (LongTailTeacherConfig).
//
// Thread-safety: GenerateCtr has no shared state.
#ifndef SYNCOPATE_LIBS_DATAGEN_CTR_GENERATOR_H_
#define SYNCOPATE_LIBS_DATAGEN_CTR_GENERATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "libs/datagen/pairs_teacher.h"
#include "libs/datagen/segment_teacher.h"
#include "libs/datagen/teacher_config.h"

namespace syncopate::datagen {

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
// replay it row by row. Train and test files come from one teacher_seed with different
// sample_seeds. With kind kSegments the rows come from SegmentTeacher::Sample likewise (label from
// p(click | x, z)), and bayes_auc / bayes_logloss are those of p(click | x).
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
