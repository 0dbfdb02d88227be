#include "libs/model/auc.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace syncopate::model {

double MacroOneVsRestAuc(std::span<const float> scores, std::span<const int32_t> labels,
                         int num_classes) {
  const size_t n = labels.size();
  std::vector<size_t> order(n);
  double auc_sum = 0.0;
  int classes = 0;
  for (int c = 0; c < num_classes; ++c) {
    auto score = [&](size_t i) { return scores[i * num_classes + c]; };
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score(a) < score(b); });
    // Sum of the (1-based, tie-averaged) ranks of the positives.
    double positive_rank_sum = 0.0;
    int64_t positives = 0;
    for (size_t begin = 0; begin < n;) {
      size_t end = begin + 1;
      while (end < n && score(order[end]) == score(order[begin])) ++end;
      const double mean_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2;
      for (size_t k = begin; k < end; ++k) {
        if (labels[order[k]] == c) {
          positive_rank_sum += mean_rank;
          ++positives;
        }
      }
      begin = end;
    }
    const int64_t negatives = static_cast<int64_t>(n) - positives;
    if (positives == 0 || negatives == 0) continue;
    const double p = static_cast<double>(positives);
    auc_sum += (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
    ++classes;
  }
  return classes == 0 ? std::numeric_limits<double>::quiet_NaN() : auc_sum / classes;
}

}  // namespace syncopate::model
