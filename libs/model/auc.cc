#include "libs/model/auc.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace syncopate::model {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One example as the rank statistic sees it. Sorting these (rather than indices into the scores)
// keeps the sort's memory access sequential, which matters for the millions of rows of a CTR file.
struct Scored {
  float score;
  bool positive;
};

// A strict weak order even with NaN scores (a diverged model produces them, and std::sort with
// plain `<` over NaN is undefined behaviour): NaN first, then ascending.
bool ScoreLess(float a, float b) { return std::isnan(a) ? !std::isnan(b) : a < b; }
bool ScoreEqual(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The Mann-Whitney AUC of `examples` (reordered in place): sum the tie-averaged 1-based ranks of
// the positives, subtract the positives' minimum possible rank sum p(p+1)/2, and divide by p x n.
// NaN when either class is absent.
double RankAuc(std::vector<Scored>& examples) {
  std::sort(examples.begin(), examples.end(),
            [](const Scored& a, const Scored& b) { return ScoreLess(a.score, b.score); });
  const size_t n = examples.size();
  double positive_rank_sum = 0.0;
  int64_t positives = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    while (end < n && ScoreEqual(examples[end].score, examples[begin].score)) ++end;
    int64_t group_positives = 0;
    for (size_t k = begin; k < end; ++k) group_positives += examples[k].positive ? 1 : 0;
    const double mean_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2;
    positive_rank_sum += mean_rank * static_cast<double>(group_positives);
    positives += group_positives;
    begin = end;
  }
  const int64_t negatives = static_cast<int64_t>(n) - positives;
  if (positives == 0 || negatives == 0) return kNaN;
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

}  // namespace

double BinaryAuc(std::span<const float> scores, std::span<const float> labels) {
  if (scores.size() != labels.size()) return kNaN;
  std::vector<Scored> examples(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) examples[i] = {scores[i], labels[i] >= 0.5f};
  return RankAuc(examples);
}

namespace {

// Histogram bins: NaN, then scores <= 0, then positive floats below 1 by their top bits, then
// scores >= 1.
constexpr int kDroppedBits = 12;
constexpr uint32_t kOneBits = 0x3F800000;  // 1.0f
constexpr size_t kBins = (kOneBits >> kDroppedBits) + 3;

size_t BinOf(float score) {
  if (std::isnan(score)) return 0;
  if (score <= 0) return 1;
  if (score >= 1) return kBins - 1;
  uint32_t bits = 0;
  std::memcpy(&bits, &score, sizeof(bits));
  return (bits >> kDroppedBits) + 2;
}

}  // namespace

StreamingAuc::StreamingAuc(int64_t exact_limit) : exact_limit_(exact_limit) {}

void StreamingAuc::Add(std::span<const float> scores, std::span<const float> labels) {
  const size_t n = std::min(scores.size(), labels.size());
  examples_ += static_cast<int64_t>(n);
  if (exact() && examples_ > exact_limit_) MoveToHistogram();
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] >= 0.5f) ++positives_;
    if (exact()) {
      scores_.push_back(scores[i]);
      positive_.push_back(labels[i] >= 0.5f);
    } else {
      AddToHistogram(scores[i], labels[i] >= 0.5f);
    }
  }
}

void StreamingAuc::MoveToHistogram() {
  histogram_positive_.assign(kBins, 0);
  histogram_negative_.assign(kBins, 0);
  for (size_t i = 0; i < scores_.size(); ++i) AddToHistogram(scores_[i], positive_[i]);
  std::vector<float>().swap(scores_);
  std::vector<bool>().swap(positive_);
}

void StreamingAuc::AddToHistogram(float score, bool positive) {
  (positive ? histogram_positive_ : histogram_negative_)[BinOf(score)] += 1;
}

double StreamingAuc::Auc() const {
  if (exact()) {
    std::vector<Scored> examples(scores_.size());
    for (size_t i = 0; i < scores_.size(); ++i) examples[i] = {scores_[i], positive_[i]};
    return RankAuc(examples);
  }
  // Each positive beats every negative in a lower bin and ties (one half) those in its own.
  double wins = 0;
  double negatives_below = 0;
  double positives = 0;
  for (size_t b = 0; b < kBins; ++b) {
    const double p = static_cast<double>(histogram_positive_[b]);
    const double n = static_cast<double>(histogram_negative_[b]);
    wins += p * (negatives_below + 0.5 * n);
    negatives_below += n;
    positives += p;
  }
  if (positives == 0 || negatives_below == 0) return kNaN;
  return wins / (positives * negatives_below);
}

double AucStandardError(double auc, int64_t positives, int64_t negatives) {
  if (positives <= 0 || negatives <= 0 || !std::isfinite(auc)) return 0;
  const double a = auc;
  const double q1 = a / (2 - a);
  const double q2 = 2 * a * a / (1 + a);
  const double p = static_cast<double>(positives);
  const double n = static_cast<double>(negatives);
  const double variance = (a * (1 - a) + (p - 1) * (q1 - a * a) + (n - 1) * (q2 - a * a)) / (p * n);
  return std::sqrt(std::max(0.0, variance));
}

double LogLoss(std::span<const float> probabilities, std::span<const float> labels) {
  if (probabilities.size() != labels.size() || labels.empty()) return kNaN;
  constexpr double kEpsilon = 1e-7;
  double sum = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double p = std::clamp(static_cast<double>(probabilities[i]), kEpsilon, 1.0 - kEpsilon);
    const double y = labels[i];
    sum -= y * std::log(p) + (1.0 - y) * std::log1p(-p);
  }
  return sum / static_cast<double>(labels.size());
}

double MacroOneVsRestAuc(std::span<const float> scores, std::span<const int32_t> labels,
                         int num_classes) {
  const size_t n = labels.size();
  std::vector<Scored> examples(n);
  double auc_sum = 0.0;
  int classes = 0;
  for (int c = 0; c < num_classes; ++c) {
    for (size_t i = 0; i < n; ++i) examples[i] = {scores[i * num_classes + c], labels[i] == c};
    const double auc = RankAuc(examples);
    if (std::isnan(auc)) continue;
    auc_sum += auc;
    ++classes;
  }
  return classes == 0 ? kNaN : auc_sum / classes;
}

}  // namespace syncopate::model
