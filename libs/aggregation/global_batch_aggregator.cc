#include "libs/aggregation/global_batch_aggregator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "libs/isa/isa.h"
#include "libs/straggler/staleness.h"
#include "libs/straggler/straggler_detector.h"

namespace syncopate::aggregation {

GlobalBatchAggregator::GlobalBatchAggregator(int64_t dim, int64_t global_batch, v1::Mode mode,
                                             int64_t version, std::vector<int32_t> table_dims)
    : kernels_(AggregationKernelsFor(isa::ActiveIsaLevel())),
      dim_(dim),
      global_batch_(global_batch),
      mode_(mode),
      version_(version),
      weighted_sum_(static_cast<size_t>(dim), 0.0f),
      sparse_(table_dims.size()) {
  for (size_t t = 0; t < table_dims.size(); ++t) sparse_[t].dim = table_dims[t];
}

int64_t GlobalBatchAggregator::buffered_rows() const {
  int64_t rows = 0;
  for (const SparseBuffer& buffer : sparse_) rows += static_cast<int64_t>(buffer.keys.size());
  return rows;
}

int64_t GlobalBatchAggregator::staleness_threshold() const {
  return StalenessThreshold(static_cast<int>(members_.size()), local_batch_, global_batch_);
}

PushVerdict GlobalBatchAggregator::Push(const GradientPush& push) {
  PushVerdict verdict;
  auto reject = [&](absl::Status status) {
    verdict.outcome = v1::PUSH_REJECTED;
    verdict.status = std::move(status);
    return verdict;
  };
  if (!members_.contains(push.worker)) {
    return reject(absl::FailedPreconditionError(absl::StrCat(
        "worker ", push.worker, " is not a member of this shard's membership (departed or not ",
        "yet announced by the coordinator)")));
  }
  if (push.token > version_) {
    return reject(absl::OutOfRangeError(absl::StrCat(
        "token ", push.token, " is from the future: the shard is at version ", version_)));
  }
  if (push.token < 0) {
    return reject(absl::InvalidArgumentError(absl::StrCat("negative token ", push.token)));
  }
  // Only now, with 0 <= token <= version: version - INT64_MIN overflowed (found by fuzzing).
  verdict.staleness = version_ - push.token;
  switch (mode_) {
    case v1::MODE_SYNC:
      if (push.token < version_) {
        // Stale by definition (docs/design.md §5): its content is dropped. It still fills its
        // member's place in this barrier (see the header: a member left owing the barrier can
        // deadlock two shards).
        if (pushed_this_version_.insert(push.worker).second && push.token < sync_since_) {
          unheld_placeholders_.insert(push.worker);
        }
        verdict.outcome = v1::PUSH_DROPPED;
        return verdict;
      }
      if (pushed_this_version_.contains(push.worker) && !unheld_placeholders_.erase(push.worker)) {
        return reject(absl::AlreadyExistsError(absl::StrCat(
            "worker ", push.worker, " already pushed a gradient for version ", version_)));
      }
      pushed_this_version_.insert(push.worker);
      Accumulate(push, 1.0);
      verdict.outcome = v1::PUSH_APPLIED;
      verdict.weight = 1.0;
      return verdict;
    case v1::MODE_GBA: {
      const double weight = StalenessWeight(verdict.staleness, staleness_threshold());
      Accumulate(push, weight);
      RecordStaleness(push.worker, verdict.staleness);
      verdict.outcome = weight < 1.0 ? v1::PUSH_DECAYED : v1::PUSH_APPLIED;
      verdict.weight = weight;
      return verdict;
    }
    case v1::MODE_ASYNC:
      Accumulate(push, 1.0);
      verdict.outcome = v1::PUSH_APPLIED;
      verdict.weight = 1.0;
      return verdict;
    default:
      return reject(absl::InternalError(absl::StrCat("shard has no aggregation mode ", mode_)));
  }
}

void GlobalBatchAggregator::RecordStaleness(int32_t worker, int64_t staleness) {
  std::deque<int64_t>& recent = recent_staleness_[worker];
  recent.push_back(staleness);
  const size_t window =
      static_cast<size_t>(StragglerDetector::WindowForWorkers(static_cast<int>(members_.size())));
  while (recent.size() > window) recent.pop_front();
}

double GlobalBatchAggregator::PredictedStaleness(int32_t worker) const {
  if (mode_ == v1::MODE_SYNC) return 0;
  const auto it = recent_staleness_.find(worker);
  if (it == recent_staleness_.end() || it->second.empty()) return 0;
  double sum = 0;
  for (const int64_t staleness : it->second) sum += static_cast<double>(staleness);
  return sum / static_cast<double>(it->second.size());
}

bool GlobalBatchAggregator::BufferedMean(std::span<float> out) const {
  if (!dense_sum_holds_pushes_ || buffered_samples_ <= 0) return false;
  kernels_.divide_into(out.data(), weighted_sum_.data(), static_cast<size_t>(dim_),
                       static_cast<float>(buffered_samples_));
  return true;
}

void GlobalBatchAggregator::Accumulate(const GradientPush& push, double weight) {
  // Gradients arrive as means over b samples; the buffer holds sums so that any mix of batch
  // sizes normalises by the total sample count.
  const float scale = static_cast<float>(weight * static_cast<double>(push.samples));
  if (dense_sum_holds_pushes_) {
    kernels_.accumulate(weighted_sum_.data(), push.gradient.data(), static_cast<size_t>(dim_),
                        scale);
  } else {
    kernels_.scale_into(weighted_sum_.data(), push.gradient.data(), static_cast<size_t>(dim_),
                        scale);
    dense_sum_holds_pushes_ = true;
  }
  for (const SparseGradient& rows : push.sparse) {
    SparseBuffer& buffer = sparse_[rows.table];
    const size_t dim = static_cast<size_t>(buffer.dim);
    for (size_t k = 0; k < rows.keys.size(); ++k) {
      const auto [it, inserted] =
          buffer.index.try_emplace(rows.keys[k], static_cast<uint32_t>(buffer.keys.size()));
      if (inserted) {
        buffer.keys.push_back(rows.keys[k]);
        buffer.sums.resize(buffer.sums.size() + dim, 0.0f);
      }
      float* row_sum = buffer.sums.data() + static_cast<size_t>(it->second) * dim;
      kernels_.accumulate(row_sum, rows.rows.data() + k * dim, dim, scale);
    }
  }
  buffered_samples_ += push.samples;
}

void GlobalBatchAggregator::ClearBuffer() {
  dense_sum_holds_pushes_ = false;
  for (SparseBuffer& buffer : sparse_) {
    buffer.index.clear();
    buffer.keys.clear();
    buffer.sums.clear();
  }
  buffered_samples_ = 0;
  pushed_this_version_.clear();
  unheld_placeholders_.clear();
  flush_pending_ = false;
}

bool GlobalBatchAggregator::UpdateReady() const {
  if (flush_pending_) return buffered_samples_ > 0;
  switch (mode_) {
    case v1::MODE_SYNC:
      // Every member has filled its place. With no samples (every place filled by a stale,
      // dropped gradient) the barrier still releases: the version moves on without an update.
      if (members_.empty()) return false;
      for (int32_t member : members_) {
        if (!pushed_this_version_.contains(member)) return false;
      }
      return true;
    case v1::MODE_GBA:
      return buffered_samples_ > 0 && buffered_samples_ >= global_batch_;
    case v1::MODE_ASYNC:
      return buffered_samples_ > 0;
    default:
      return false;
  }
}

int64_t GlobalBatchAggregator::TakeUpdate(std::span<float> mean, SparseUpdate* sparse) {
  const int64_t samples = buffered_samples_;
  // The divisor's test is made once, outside the kernel's loop (perf: as a scalar loop stalled
  // on each divss it cost more per version than the optimizer's update). The sum is not zeroed:
  // ClearBuffer marks it empty.
  if (samples > 0 && dense_sum_holds_pushes_) {
    // As NormalisedByGlobalBatch divides.
    kernels_.divide_into(mean.data(), weighted_sum_.data(), static_cast<size_t>(dim_),
                         static_cast<float>(samples));
  } else {
    std::fill(mean.begin(), mean.begin() + dim_, 0.0f);
  }
  if (sparse != nullptr) {
    sparse->tables.resize(sparse_.size());
    for (size_t t = 0; t < sparse_.size(); ++t) {
      SparseUpdate::Table& out = sparse->tables[t];
      out.keys.swap(sparse_[t].keys);  // ClearBuffer empties what was `out.keys`
      out.rows.resize(sparse_[t].sums.size());
      for (size_t i = 0; i < out.rows.size(); ++i) {
        out.rows[i] = NormalisedByGlobalBatch(sparse_[t].sums[i], samples);
      }
    }
  }
  ClearBuffer();
  ++version_;
  return samples;
}

void GlobalBatchAggregator::SetMembership(const v1::Membership& membership) {
  members_.clear();
  members_.insert(membership.worker_ids().begin(), membership.worker_ids().end());
  local_batch_ = membership.local_batch();
}

void GlobalBatchAggregator::SetMode(v1::Mode mode) {
  if (mode == mode_) return;
  const bool keeps_buffer = mode_ == v1::MODE_SYNC && mode == v1::MODE_GBA;
  if (!keeps_buffer && buffered_samples_ > 0) flush_pending_ = true;
  // The flush, if any, is the next update: sync proper starts at the version after it.
  if (mode == v1::MODE_SYNC) sync_since_ = version_ + (flush_pending_ ? 1 : 0);
  mode_ = mode;
  recent_staleness_.clear();  // another mode, another staleness
}

void GlobalBatchAggregator::RestoreVersion(int64_t version) {
  ClearBuffer();
  recent_staleness_.clear();
  version_ = version;
  sync_since_ = version;
}

std::vector<int32_t> GlobalBatchAggregator::BarrierWaitingFor() const {
  std::vector<int32_t> waiting;
  if (mode_ != v1::MODE_SYNC) return waiting;
  for (int32_t member : members_) {
    if (!pushed_this_version_.contains(member)) waiting.push_back(member);
  }
  std::sort(waiting.begin(), waiting.end());
  return waiting;
}

}  // namespace syncopate::aggregation
