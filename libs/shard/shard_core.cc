#include "libs/shard/shard_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/tensor/initializer.h"
#include "libs/tensor/packed.h"

namespace syncopate::shard {
namespace {

// The shard rejects a mode it cannot run with INVALID_ARGUMENT before anything is built.
bool IsShardMode(v1::Mode mode) {
  return mode == v1::MODE_SYNC || mode == v1::MODE_GBA || mode == v1::MODE_ASYNC;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardCore>> ShardCore::Create(const v1::ShardAssignment& assignment,
                                                             Clock* clock, ShardMetrics* metrics,
                                                             int64_t max_push_bytes) {
  const v1::ShardPartition& partition = assignment.partition();
  const int64_t size = partition.flat_end() - partition.flat_begin();
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", partition.shard_id(), " was assigned an empty range"));
  }
  if (!IsShardMode(assignment.mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard cannot aggregate in mode ", v1::Mode_Name(assignment.mode())));
  }
  if (assignment.job().global_batch() <= 0) {
    return absl::InvalidArgumentError("job.global_batch must be positive");
  }
  if (max_push_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the push size limit must be positive, got ", max_push_bytes));
  }
  SYNCOPATE_ASSIGN_OR_RETURN(auto optimizer,
                             optim::CreateOptimizer(assignment.job().optimizer(), size));
  auto core = std::unique_ptr<ShardCore>(
      new ShardCore(assignment, clock, metrics, std::move(optimizer), max_push_bytes));
  absl::MutexLock lock(&core->mu_);
  // (offset, length) of every slice: they must tile the range exactly, so a total that adds up
  // is not enough (an overlap could hide a gap that would stay uninitialised).
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const v1::TensorSlice& slice : partition.slices()) {
    const int64_t offset = slice.flat_offset() - partition.flat_begin();
    if (offset < 0 || slice.length() < 0 || offset + slice.length() > size) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice of ", slice.tensor(), " lies outside the shard's range"));
    }
    SYNCOPATE_RETURN_IF_ERROR(tensor::InitializeSlice(
        slice.init(), assignment.job().seed(), slice.tensor(), slice.tensor_offset(),
        std::span<float>(core->params_).subspan(offset, slice.length())));
    spans.emplace_back(offset, slice.length());
  }
  std::sort(spans.begin(), spans.end());
  int64_t covered = 0;
  for (const auto& [offset, length] : spans) {
    if (offset != covered) {
      return absl::InvalidArgumentError(
          absl::StrCat("slices ", offset < covered ? "overlap" : "leave a gap", " at flat offset ",
                       partition.flat_begin() + std::min(offset, covered)));
    }
    covered += length;
  }
  if (covered != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("slices cover ", covered, " of the shard's ", size, " parameters"));
  }
  core->aggregator_.SetMembership(assignment.membership());
  if (metrics != nullptr) {
    metrics->SetVersion(0);
    metrics->SetMode(assignment.mode());
    metrics->SetBytes(size * static_cast<int64_t>(sizeof(float)), core->optimizer_->state_bytes());
  }
  return core;
}

ShardCore::ShardCore(const v1::ShardAssignment& assignment, Clock* clock, ShardMetrics* metrics,
                     std::unique_ptr<optim::Optimizer> optimizer, int64_t max_push_bytes)
    : flat_begin_(assignment.partition().flat_begin()),
      flat_end_(assignment.partition().flat_end()),
      assignment_(assignment),
      clock_(clock),
      metrics_(metrics),
      max_push_bytes_(max_push_bytes),
      params_(static_cast<size_t>(flat_end_ - flat_begin_)),
      mean_gradient_(params_.size()),
      optimizer_(std::move(optimizer)),
      aggregator_(static_cast<int64_t>(params_.size()), assignment.job().global_batch(),
                  assignment.mode()),
      scratch_gradient_(params_.size()) {}

v1::PushAck ShardCore::Reject(v1::PushAck ack, const absl::Status& status,
                              const std::string& reason) {
  ack.set_outcome(v1::PUSH_REJECTED);
  ack.set_code(static_cast<int32_t>(status.code()));
  ack.set_message(std::string(status.message()));
  ack.set_version(aggregator_.version());
  ++counts_.rejected;
  if (metrics_ != nullptr) {
    metrics_->CountOutcome(v1::PUSH_REJECTED, 0);
    metrics_->CountRejection(reason);
  }
  return ack;
}

v1::PushAck ShardCore::Push(int32_t worker, const v1::PushRequest& push) {
  std::vector<ReadyPull> ready;
  v1::PushAck ack;
  ack.set_request_id(push.request_id());
  {
    absl::MutexLock lock(&mu_);
    // Validate everything before touching the aggregator: nothing invalid is ever applied.
    // Size first: the whole message, so sparse rows count as much as the dense gradient.
    if (const size_t bytes = push.ByteSizeLong(); bytes > static_cast<size_t>(max_push_bytes_)) {
      return Reject(ack,
                    absl::ResourceExhaustedError(
                        absl::StrCat("push of ", bytes, " bytes exceeds the shard's limit of ",
                                     max_push_bytes_, " bytes")),
                    "oversize");
    }
    if (push.samples() <= 0) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("samples must be positive, got ", push.samples())),
                    "bad_samples");
    }
    // No worker's share of G exceeds G; a larger count would let one push outweigh a whole
    // global batch (and could overflow the buffered sample count).
    if (push.samples() > aggregator_.global_batch()) {
      return Reject(
          ack,
          absl::InvalidArgumentError(absl::StrCat(
              "samples ", push.samples(), " exceed the global batch ", aggregator_.global_batch())),
          "bad_samples");
    }
    absl::Status unpacked = tensor::UnpackFloatsInto(push.gradient(), scratch_gradient_);
    if (!unpacked.ok()) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("gradient for shard range [", flat_begin_, ", ", flat_end_,
                                     ") has the wrong length: ", unpacked.message())),
                    "wrong_shape");
    }
    if (!tensor::AllFinite(scratch_gradient_)) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("gradient has a non-finite value (NaN or Inf) at element ",
                                     tensor::FirstNonFinite(scratch_gradient_))),
                    "non_finite");
    }
    aggregation::PushVerdict verdict = aggregator_.Push(
        {worker, push.token(), push.samples(), std::span<const float>(scratch_gradient_)});
    ack.set_staleness(verdict.staleness);
    ack.set_weight(verdict.weight);
    if (verdict.outcome == v1::PUSH_REJECTED) {
      std::string reason = "invalid";
      switch (verdict.status.code()) {
        case absl::StatusCode::kFailedPrecondition:
          reason = "not_member";
          break;
        case absl::StatusCode::kOutOfRange:
          reason = "future_token";
          break;
        case absl::StatusCode::kAlreadyExists:
          reason = "duplicate";
          break;
        default:
          break;
      }
      return Reject(ack, verdict.status, reason);
    }
    ack.set_outcome(verdict.outcome);
    switch (verdict.outcome) {
      case v1::PUSH_APPLIED:
        ++counts_.applied;
        break;
      case v1::PUSH_DECAYED:
        ++counts_.decayed;
        break;
      case v1::PUSH_DROPPED:
        ++counts_.dropped;
        break;
      default:
        break;
    }
    if (metrics_ != nullptr) metrics_->CountOutcome(verdict.outcome, verdict.staleness);
    ApplyReadyUpdates(&ready);
    ack.set_version(aggregator_.version());
  }
  Deliver(ready);
  return ack;
}

void ShardCore::ApplyReadyUpdates(std::vector<ReadyPull>* ready) {
  bool applied = false;
  while (aggregator_.UpdateReady()) {
    const absl::Time start = clock_->Now();
    aggregator_.TakeUpdate(mean_gradient_);
    optimizer_->Apply(params_, mean_gradient_);
    ++counts_.updates;
    applied = true;
    if (metrics_ != nullptr) {
      metrics_->CountUpdate(absl::ToDoubleSeconds(clock_->Now() - start));
    }
  }
  if (!applied) return;
  if (metrics_ != nullptr) metrics_->SetVersion(aggregator_.version());
  const int64_t version = aggregator_.version();
  auto due = std::stable_partition(pending_pulls_.begin(), pending_pulls_.end(),
                                   [&](const PendingPull& p) { return p.min_version > version; });
  for (auto it = due; it != pending_pulls_.end(); ++it) {
    ready->push_back({std::move(it->done), MakeResponse(it->request_id, it->since)});
  }
  pending_pulls_.erase(due, pending_pulls_.end());
}

v1::PullResponse ShardCore::MakeResponse(int64_t request_id, absl::Time since) const {
  v1::PullResponse response;
  response.set_request_id(request_id);
  response.set_version(aggregator_.version());
  response.set_mode(aggregator_.mode());
  response.set_values(tensor::PackFloats(params_));
  const double held = absl::ToDoubleSeconds(clock_->Now() - since);
  response.set_held_seconds(held);
  if (metrics_ != nullptr) metrics_->ObservePullHeld(held);
  return response;
}

void ShardCore::Deliver(std::vector<ReadyPull>& ready) {
  for (ReadyPull& pull : ready) pull.done(std::move(pull.response));
}

void ShardCore::Pull(const void* owner, int64_t request_id, int64_t min_version,
                     PullCallback done) {
  v1::PullResponse response;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    // Only a sync barrier holds pulls; gba and async always serve the newest parameters.
    if (aggregator_.mode() == v1::MODE_SYNC && aggregator_.version() < min_version) {
      pending_pulls_.push_back({owner, request_id, min_version, now, std::move(done)});
      return;
    }
    response = MakeResponse(request_id, now);
  }
  done(std::move(response));
}

void ShardCore::CancelPulls(const void* owner) {
  absl::MutexLock lock(&mu_);
  std::erase_if(pending_pulls_, [owner](const PendingPull& p) { return p.owner == owner; });
}

void ShardCore::SetMembership(const v1::Membership& membership) {
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    aggregator_.SetMembership(membership);
    ApplyReadyUpdates(&ready);  // a barrier may have been waiting only on departed workers
  }
  Deliver(ready);
}

void ShardCore::SetMode(v1::Mode mode) {
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    if (!IsShardMode(mode)) return;
    aggregator_.SetMode(mode);
    if (metrics_ != nullptr) metrics_->SetMode(mode);
    ApplyReadyUpdates(&ready);  // gba->sync flushes the old buffer as one update
    // Pulls held for a version that a barrier will now never produce on its own (sync->gba
    // keeps the version) are answered with the newest parameters: gba pulls never wait.
    if (mode != v1::MODE_SYNC) {
      for (PendingPull& p : pending_pulls_) {
        ready.push_back({std::move(p.done), MakeResponse(p.request_id, p.since)});
      }
      pending_pulls_.clear();
    }
  }
  Deliver(ready);
}

ShardStats ShardCore::Stats() const {
  absl::MutexLock lock(&mu_);
  ShardStats stats = counts_;
  stats.version = aggregator_.version();
  stats.mode = aggregator_.mode();
  stats.barrier_waiting_for = aggregator_.BarrierWaitingFor();
  stats.pending_pulls = static_cast<int64_t>(pending_pulls_.size());
  return stats;
}

std::vector<float> ShardCore::Parameters() const {
  absl::MutexLock lock(&mu_);
  return params_;
}

v1::ShardCheckpoint ShardCore::Snapshot() const {
  v1::ShardCheckpoint checkpoint;
  checkpoint.set_job_id(assignment_.job().job_id());
  checkpoint.set_shard_id(assignment_.partition().shard_id());
  checkpoint.set_num_shards(assignment_.job().num_shards());
  checkpoint.set_created_unix_millis(absl::ToUnixMillis(clock_->Now()));
  absl::MutexLock lock(&mu_);
  checkpoint.set_version(aggregator_.version());
  checkpoint.set_mode(aggregator_.mode());
  checkpoint.set_optimizer(std::string(optimizer_->name()));
  const std::vector<std::span<float>> state = optimizer_->state_vectors();
  for (const v1::TensorSlice& slice : assignment_.partition().slices()) {
    const int64_t offset = slice.flat_offset() - flat_begin_;
    v1::CheckpointSlice* out = checkpoint.add_slices();
    out->set_tensor(slice.tensor());
    out->set_tensor_offset(slice.tensor_offset());
    out->set_length(slice.length());
    out->set_values(
        tensor::PackFloats(std::span<const float>(params_).subspan(offset, slice.length())));
    for (std::span<float> vector : state) {
      out->add_optimizer_state(tensor::PackFloats(vector.subspan(offset, slice.length())));
    }
  }
  return checkpoint;
}

absl::Status ShardCore::Restore(const std::vector<v1::ShardCheckpoint>& sources) {
  absl::MutexLock lock(&mu_);
  std::vector<float> params = params_;
  std::vector<std::span<float>> state = optimizer_->state_vectors();
  std::vector<std::vector<float>> new_state;
  for (std::span<float> vector : state) new_state.emplace_back(vector.begin(), vector.end());
  int64_t covered = 0;
  int64_t version = 0;
  std::vector<float> values;
  for (const v1::ShardCheckpoint& source : sources) {
    if (source.job_id() != assignment_.job().job_id()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint of job '", source.job_id(),
                                                        "' cannot restore job '",
                                                        assignment_.job().job_id(), "'"));
    }
    if (source.optimizer() != optimizer_->name()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint optimizer ", source.optimizer(),
                                                        " differs from ",
                                                        std::string(optimizer_->name())));
    }
    version = std::max(version, source.version());
    // Validate every slice before any allocation: a checksummed but corrupt or crafted file must
    // not make the shard allocate what its fields claim (found by checkpoint_fuzz).
    for (const v1::CheckpointSlice& from : source.slices()) {
      const uint64_t bytes = static_cast<uint64_t>(from.length()) * sizeof(float);
      bool sound = from.length() >= 0 && from.tensor_offset() >= 0 &&
                   from.tensor_offset() <= INT64_MAX - from.length() &&
                   from.values().size() == bytes;
      for (const std::string& vector : from.optimizer_state())
        sound = sound && vector.size() == bytes;
      if (!sound) {
        return absl::DataLossError(absl::StrCat("checkpoint slice of ", from.tensor(),
                                                " is inconsistent (length ", from.length(), ", ",
                                                from.values().size(), " value bytes)"));
      }
    }
    for (const v1::CheckpointSlice& from : source.slices()) {
      if (static_cast<size_t>(from.optimizer_state_size()) != state.size()) {
        return absl::FailedPreconditionError("checkpoint optimizer state has the wrong shape");
      }
      for (const v1::TensorSlice& to : assignment_.partition().slices()) {
        if (to.tensor() != from.tensor()) continue;
        // The overlap of [from.offset, +from.length) and [to.offset, +to.length) in the tensor.
        const int64_t begin = std::max(from.tensor_offset(), to.tensor_offset());
        const int64_t end =
            std::min(from.tensor_offset() + from.length(), to.tensor_offset() + to.length());
        if (begin >= end) continue;
        const int64_t dst = to.flat_offset() - flat_begin_ + (begin - to.tensor_offset());
        const int64_t src = begin - from.tensor_offset();
        values.resize(from.length());
        SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(from.values(), values));
        std::copy_n(values.begin() + src, end - begin, params.begin() + dst);
        for (size_t k = 0; k < state.size(); ++k) {
          SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(from.optimizer_state(k), values));
          std::copy_n(values.begin() + src, end - begin, new_state[k].begin() + dst);
        }
        covered += end - begin;
      }
    }
  }
  if (covered != static_cast<int64_t>(params_.size())) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoints cover ", covered, " of the ",
                                                      params_.size(), " parameters of shard ",
                                                      assignment_.partition().shard_id()));
  }
  params_ = std::move(params);
  for (size_t k = 0; k < state.size(); ++k) {
    std::copy(new_state[k].begin(), new_state[k].end(), state[k].begin());
  }
  aggregator_.RestoreVersion(version);
  if (metrics_ != nullptr) metrics_->SetVersion(version);
  return absl::OkStatus();
}

}  // namespace syncopate::shard
