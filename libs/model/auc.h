// Area under the ROC curve (binary, and multi-class one-vs-rest) and logistic loss.
// Thread-safety: pure functions; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_MODEL_AUC_H_
#define SYNCOPATE_LIBS_MODEL_AUC_H_

#include <cstdint>
#include <span>
#include <vector>

namespace syncopate::model {

// Exact ROC AUC of `scores` for `labels` (1 = positive, 0 = negative; any value >= 0.5 counts as
// positive): the probability that a random positive scores above a random negative, ties counting
// one half (the Mann-Whitney U statistic divided by positives x negatives). O(n log n). NaN scores
// rank below every number and tie with each other. NaN when all labels are equal, the inputs are
// empty, or the two spans differ in size.
double BinaryAuc(std::span<const float> scores, std::span<const float> labels);

// BinaryAuc over examples that arrive in chunks, in bounded memory: exact (the same value as
// BinaryAuc over everything added) while at most `exact_limit` examples have been added; past
// that every score moves into a histogram keyed by the float's top bits (positive floats order as
// their bit patterns; >> 12 keeps 11 mantissa bits, so a bin spans a relative 2^-11 of its score)
// and pairs that share a bin count one half, as ties do. The error that adds is at most half the
// fraction of positive-negative pairs sharing a bin (measured < 1e-4 on spread-out scores,
// auc_test). Memory: 8 bytes per example up to the limit (8 MiB at the default 2^20), then a
// fixed 4 MiB. Thread-compatible.
class StreamingAuc {
 public:
  explicit StreamingAuc(int64_t exact_limit = int64_t{1} << 20);
  // `labels` as BinaryAuc's; the two spans must be the same size (extra entries are ignored).
  void Add(std::span<const float> scores, std::span<const float> labels);
  // NaN when either class is absent. Does not reset.
  double Auc() const;
  int64_t examples() const { return examples_; }
  int64_t positives() const { return positives_; }
  bool exact() const { return histogram_positive_.empty(); }

 private:
  void MoveToHistogram();
  void AddToHistogram(float score, bool positive);

  int64_t exact_limit_;
  int64_t examples_ = 0;
  int64_t positives_ = 0;
  std::vector<float> scores_;  // exact mode
  std::vector<bool> positive_;
  std::vector<int64_t> histogram_positive_;  // histogram mode
  std::vector<int64_t> histogram_negative_;
};

// The standard error of an AUC measured on `positives` and `negatives` examples (Hanley & McNeil
// 1982, "The meaning and use of the area under a ROC curve", eq. 1, with their exponential
// approximations Q1 = A / (2 - A), Q2 = 2A^2 / (1 + A)): how far the same model's AUC would move
// on another sample of that size. 0 when either count is 0.
double AucStandardError(double auc, int64_t positives, int64_t negatives);

// Mean over examples of -[y log p + (1 - y) log(1 - p)], with p clamped to [1e-7, 1 - 1e-7] so a
// confident miss costs about 16.1 rather than infinity. NaN when the inputs are empty or differ in
// size, or when a probability is NaN.
double LogLoss(std::span<const float> probabilities, std::span<const float> labels);

// `scores` holds num_classes scores per example, example-major (scores[i * num_classes + c]);
// `labels[i]` is example i's class in [0, num_classes). For each class c, the AUC of "is c"
// against "is not c" ranked by score c (as BinaryAuc), then the unweighted mean over the classes
// that have both positives and negatives, as in scikit-learn's
// roc_auc_score(average="macro", multi_class="ovr"). NaN when no class qualifies.
double MacroOneVsRestAuc(std::span<const float> scores, std::span<const int32_t> labels,
                         int num_classes);

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_AUC_H_
