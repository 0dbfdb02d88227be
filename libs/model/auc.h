// Area under the ROC curve (binary, and multi-class one-vs-rest) and logistic loss.
// Thread-safety: pure functions; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_MODEL_AUC_H_
#define SYNCOPATE_LIBS_MODEL_AUC_H_

#include <cstdint>
#include <span>

namespace syncopate::model {

// Exact ROC AUC of `scores` for `labels` (1 = positive, 0 = negative; any value >= 0.5 counts as
// positive): the probability that a random positive scores above a random negative, ties counting
// one half (the Mann-Whitney U statistic divided by positives x negatives). O(n log n). NaN scores
// rank below every number and tie with each other. NaN when all labels are equal, the inputs are
// empty, or the two spans differ in size.
double BinaryAuc(std::span<const float> scores, std::span<const float> labels);

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
