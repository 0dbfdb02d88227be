// Area under the ROC curve for multi-class scores (one-vs-rest, macro-averaged).
// Thread-safety: a pure function; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_MODEL_AUC_H_
#define SYNCOPATE_LIBS_MODEL_AUC_H_

#include <cstdint>
#include <span>

namespace syncopate::model {

// `scores` holds num_classes scores per example, example-major (scores[i * num_classes + c]);
// `labels[i]` is example i's class in [0, num_classes). For each class c, the AUC of "is c"
// against "is not c" ranked by score c (ties count one half: the Mann-Whitney U statistic), then
// the unweighted mean over the classes that have both positives and negatives, as in
// scikit-learn's roc_auc_score(average="macro", multi_class="ovr"). NaN when no class qualifies.
double MacroOneVsRestAuc(std::span<const float> scores, std::span<const int32_t> labels,
                         int num_classes);

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_AUC_H_
