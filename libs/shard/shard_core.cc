#include "libs/shard/shard_core.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/embedding/owner_shard.h"
#include "libs/tensor/bfloat16.h"
#include "libs/tensor/initializer.h"
#include "libs/tensor/packed.h"

namespace syncopate::shard {

absl::StatusOr<std::unique_ptr<ShardCore>> ShardCore::Create(const v1::ShardAssignment& assignment,
                                                             Clock* clock, ShardMetrics* metrics,
                                                             int64_t max_push_bytes) {
  if (metrics == nullptr) metrics = ShardMetrics::NoOp();
  const v1::ShardPartition& partition = assignment.partition();
  const int64_t size = partition.flat_end() - partition.flat_begin();
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", partition.shard_id(), " was assigned an empty range"));
  }
  // A mode the shard cannot run is rejected before anything is built.
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
  if (assignment.job().num_shards() <= 0 || partition.shard_id() < 0 ||
      partition.shard_id() >= assignment.job().num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("shard id ", partition.shard_id(),
                                                   " is outside the job's ",
                                                   assignment.job().num_shards(), " shards"));
  }
  SYNCOPATE_ASSIGN_OR_RETURN(auto optimizer,
                             optim::CreateOptimizer(assignment.job().optimizer(), size));
  SYNCOPATE_ASSIGN_OR_RETURN(auto row_rule, optim::CreateUpdateRule(assignment.job().optimizer()));
  auto core = std::unique_ptr<ShardCore>(new ShardCore(
      assignment, clock, metrics, std::move(optimizer), std::move(row_rule), max_push_bytes));
  absl::MutexLock lock(&core->mu_);
  for (const v1::EmbeddingTableSpec& spec : partition.tables()) {
    SYNCOPATE_ASSIGN_OR_RETURN(
        auto table,
        embedding::EmbeddingTable::Create(spec, assignment.job().seed(), core->row_rule_.get()));
    core->tables_.push_back(std::move(table));
  }
  // (offset, length) of every slice: they must tile the range exactly, so a total that adds up
  // is not enough (an overlap could hide a gap that would stay uninitialised).
  std::vector<std::pair<int64_t, int64_t>> spans;
  // A model that initialises itself (a PyTorch module) sends its values with the assignment.
  std::vector<float> provided;
  if (!assignment.initial_values().empty()) {
    provided.resize(size);
    if (absl::Status unpacked = tensor::UnpackFloatsInto(assignment.initial_values(), provided);
        !unpacked.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the assignment's initial values: ", unpacked.message()));
    }
  }
  for (const v1::TensorSlice& slice : partition.slices()) {
    const int64_t offset = slice.flat_offset() - partition.flat_begin();
    if (offset < 0 || slice.length() < 0 || offset + slice.length() > size) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice of ", slice.tensor(), " lies outside the shard's range"));
    }
    const std::span<float> values = std::span<float>(core->params_).subspan(offset, slice.length());
    if (slice.init().kind() == v1::Initializer::PROVIDED) {
      if (provided.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slice of ", slice.tensor(), " is PROVIDED but the assignment carries no values"));
      }
      std::copy_n(provided.begin() + offset, slice.length(), values.begin());
    } else {
      SYNCOPATE_RETURN_IF_ERROR(tensor::InitializeSlice(
          slice.init(), assignment.job().seed(), slice.tensor(), slice.tensor_offset(), values));
    }
    spans.emplace_back(offset, slice.length());
    if (slice.buffer()) core->buffer_spans_.emplace_back(offset, slice.length());
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
  core->membership_generation_ = assignment.membership().generation();
  core->aggregator_.SetMembership(assignment.membership());
  metrics->SetVersion(0);
  metrics->SetMode(assignment.mode());
  core->PublishTables();
  return core;
}

namespace {

std::vector<int32_t> TableDims(const v1::ShardPartition& partition) {
  std::vector<int32_t> dims;
  for (const v1::EmbeddingTableSpec& spec : partition.tables()) dims.push_back(spec.dim());
  return dims;
}

}  // namespace

void ShardCore::PublishTables() {
  if (metrics_ == nullptr) return;
  // Embedding rows hold their optimizer slots inline; split the table's bytes in proportion.
  int64_t parameter_bytes = size() * static_cast<int64_t>(sizeof(float));
  int64_t state_bytes = optimizer_->state_bytes();
  const int slots = row_rule_->num_slots();
  int64_t rows = 0;
  for (const auto& table : tables_) {
    rows += table->size();
    const int64_t bytes = table->memory_bytes();
    parameter_bytes += bytes / (1 + slots);
    state_bytes += bytes - bytes / (1 + slots);
    metrics_->SetTableRows(table->spec().name(), table->size(), bytes);
    metrics_->CountRowEvents(table->TakeEvents());
  }
  metrics_->SetBytes(parameter_bytes, state_bytes);
  metrics_->SetEmbeddingRows(rows);
}

ShardCore::ShardCore(const v1::ShardAssignment& assignment, Clock* clock, ShardMetrics* metrics,
                     std::unique_ptr<optim::Optimizer> optimizer,
                     std::unique_ptr<optim::UpdateRule> row_rule, int64_t max_push_bytes)
    : flat_begin_(assignment.partition().flat_begin()),
      flat_end_(assignment.partition().flat_end()),
      shard_id_(assignment.partition().shard_id()),
      num_shards_(assignment.job().num_shards()),
      table_count_(assignment.partition().tables_size()),
      assignment_(assignment),
      clock_(clock),
      metrics_(metrics),
      max_push_bytes_(max_push_bytes),
      eval_every_(std::max<int64_t>(0, assignment.job().eval().every_global_batches())),
      params_(static_cast<size_t>(flat_end_ - flat_begin_)),
      mean_gradient_(params_.size()),
      optimizer_(std::move(optimizer)),
      gradient_statistics_(optimizer_->velocity_decay()),
      row_rule_(std::move(row_rule)),
      aggregator_(static_cast<int64_t>(params_.size()), assignment.job().global_batch(),
                  assignment.mode(), /*version=*/0, TableDims(assignment.partition())),
      scratch_gradient_(params_.size()) {}

void ShardCore::CountOutcome(v1::PushOutcome outcome, int64_t staleness) {
  v1::GradientCounters& counters = counts_.gradients;
  switch (outcome) {
    case v1::PUSH_APPLIED:
      counters.set_applied(counters.applied() + 1);
      counters.set_staleness_sum(counters.staleness_sum() + staleness);
      break;
    case v1::PUSH_DECAYED:
      counters.set_decayed(counters.decayed() + 1);
      counters.set_staleness_sum(counters.staleness_sum() + staleness);
      break;
    case v1::PUSH_DROPPED:
      counters.set_dropped(counters.dropped() + 1);
      break;
    case v1::PUSH_REJECTED:
      counters.set_rejected(counters.rejected() + 1);
      break;
    default:
      break;
  }
  metrics_->CountOutcome(outcome, staleness);
}

v1::PushAck ShardCore::Reject(v1::PushAck ack, const absl::Status& status, RejectionReason reason) {
  ack.set_outcome(v1::PUSH_REJECTED);
  ack.set_code(static_cast<int32_t>(status.code()));
  ack.set_message(std::string(status.message()));
  ack.set_version(aggregator_.version());
  CountOutcome(v1::PUSH_REJECTED, 0);
  metrics_->CountRejection(reason);
  return ack;
}

v1::PullResponse PullReply::ToMessage() && {
  if (values != nullptr) response.set_values(tensor::PackFloats(*values));
  return std::move(response);
}

v1::PushAck ShardCore::RejectPush(const v1::PushRequest& push, const absl::Status& status,
                                  RejectionReason reason) {
  v1::PushAck ack;
  ack.set_request_id(push.request_id());
  absl::MutexLock lock(&mu_);
  return Reject(std::move(ack), status, reason);
}

v1::PushAck ShardCore::Push(int32_t worker, const v1::PushRequest& push) {
  return Push(worker, push, tensor::ByteChunks{{push.gradient().data(), push.gradient().size()}});
}

v1::PushAck ShardCore::Push(int32_t worker, const v1::PushRequest& push,
                            const tensor::ByteChunks& gradient) {
  std::vector<ReadyPull> ready;
  v1::PushAck ack;
  ack.set_request_id(push.request_id());
  {
    absl::MutexLock lock(&mu_);
    // Validate everything before touching the aggregator: nothing invalid is ever applied.
    // Size first: the whole message, so sparse rows count as much as the dense gradient (a
    // gradient beside the request is counted as the field it stands for).
    if (const size_t bytes =
            push.ByteSizeLong() - push.gradient().size() + tensor::TotalSize(gradient);
        bytes > static_cast<size_t>(max_push_bytes_)) {
      return Reject(ack,
                    absl::ResourceExhaustedError(
                        absl::StrCat("push of ", bytes, " bytes exceeds the shard's limit of ",
                                     max_push_bytes_, " bytes")),
                    RejectionReason::kOversize);
    }
    if (push.samples() <= 0) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("samples must be positive, got ", push.samples())),
                    RejectionReason::kBadSamples);
    }
    // No worker's share of G exceeds G; a larger count would let one push outweigh a whole
    // global batch (and could overflow the buffered sample count).
    if (push.samples() > aggregator_.global_batch()) {
      return Reject(
          ack,
          absl::InvalidArgumentError(absl::StrCat(
              "samples ", push.samples(), " exceed the global batch ", aggregator_.global_batch())),
          RejectionReason::kBadSamples);
    }
    // In sync with a velocity the gradient statistics need |g|²: measured while unpacking, it
    // also validates (a squared norm is finite exactly when every value is), instead of a scan.
    const bool measure =
        MeasuresStalenessCost(aggregator_.mode()) && gradient_statistics_.measures();
    double squared_norm = 0;
    absl::Status unpacked;
    if (push.encoding() == v1::DENSE_BFLOAT16) {
      unpacked = tensor::UnpackBfloat16Into(gradient, scratch_gradient_);
      if (unpacked.ok() && measure) squared_norm = tensor::SquaredNorm(scratch_gradient_);
    } else if (measure) {
      absl::StatusOr<double> norm = tensor::UnpackFloatsAndSquaredNorm(gradient, scratch_gradient_);
      unpacked = norm.status();
      if (norm.ok()) squared_norm = *norm;
    } else {
      unpacked = tensor::UnpackFloatsInto(gradient, scratch_gradient_);
    }
    if (!unpacked.ok()) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("gradient for shard range [", flat_begin_, ", ", flat_end_,
                                     ") has the wrong length: ", unpacked.message())),
                    RejectionReason::kWrongShape);
    }
    if (measure ? !std::isfinite(squared_norm) : !tensor::AllFinite(scratch_gradient_)) {
      return Reject(ack,
                    absl::InvalidArgumentError(
                        absl::StrCat("gradient has a non-finite value (NaN or Inf) at element ",
                                     tensor::FirstNonFinite(scratch_gradient_))),
                    RejectionReason::kNonFinite);
    }
    RejectionReason sparse_reason = RejectionReason::kWrongShape;
    absl::Status sparse_ok = UnpackSparsePush(push, &sparse_reason);
    if (!sparse_ok.ok()) return Reject(ack, sparse_ok, sparse_reason);
    aggregation::PushVerdict verdict =
        aggregator_.Push({worker, push.token(), push.samples(),
                          std::span<const float>(scratch_gradient_), scratch_sparse_});
    ack.set_staleness(verdict.staleness);
    ack.set_weight(verdict.weight);
    if (verdict.outcome == v1::PUSH_REJECTED) {
      return Reject(ack, verdict.status, AggregatorRejection(verdict.status.code()));
    }
    ack.set_outcome(verdict.outcome);
    if (measure && verdict.outcome == v1::PUSH_APPLIED) {
      // The statistics measure the parameters' gradient: a module's buffer changes (ADR 0018)
      // are not part of it.
      for (const auto& [offset, length] : buffer_spans_) {
        squared_norm -=
            tensor::SquaredNorm(std::span<const float>(scratch_gradient_).subspan(offset, length));
      }
      gradient_statistics_.AddPush(std::max(0.0, squared_norm), push.samples());
    }
    CountOutcome(verdict.outcome, verdict.staleness);
    cadence_.Record(worker, push.samples(), clock_->Now());
    ApplyReadyUpdates(&ready);
    ack.set_version(aggregator_.version());
  }
  Deliver(ready);
  return ack;
}

absl::Status ShardCore::ValidateKeys(int32_t table, std::span<const uint64_t> keys) const {
  if (table < 0 || static_cast<size_t>(table) >= static_cast<size_t>(TableCount())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table ", table, " does not exist (the job has ", TableCount(), ")"));
  }
  for (const uint64_t key : keys) {
    if (embedding::OwnerShard(key, num_shards_) != shard_id_) {
      return absl::InvalidArgumentError(absl::StrCat("key ", key, " belongs to shard ",
                                                     embedding::OwnerShard(key, num_shards_),
                                                     ", not shard ", shard_id_));
    }
  }
  return absl::OkStatus();
}

absl::Status ShardCore::UnpackSparsePush(const v1::PushRequest& push, RejectionReason* reason) {
  const size_t n = static_cast<size_t>(push.sparse_size());
  if (scratch_keys_.size() < n) {
    scratch_keys_.resize(n);
    scratch_rows_.resize(n);
  }
  scratch_sparse_.clear();
  absl::flat_hash_set<int32_t> tables_seen;
  for (size_t i = 0; i < n; ++i) {
    const v1::SparseRows& rows = push.sparse(static_cast<int>(i));
    *reason = RejectionReason::kWrongShape;
    absl::Status unpacked = tensor::UnpackKeys(rows.keys(), scratch_keys_[i]);
    if (!unpacked.ok()) return unpacked;
    absl::Status valid = ValidateKeys(rows.table(), scratch_keys_[i]);
    if (!valid.ok()) {
      if (rows.table() >= 0 && rows.table() < TableCount()) *reason = RejectionReason::kWrongShard;
      return valid;
    }
    if (!tables_seen.insert(rows.table()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding table ", rows.table(), " appears twice in one push"));
    }
    const int32_t dim = tables_[rows.table()]->dim();
    scratch_rows_[i].resize(scratch_keys_[i].size() * static_cast<size_t>(dim));
    unpacked = tensor::UnpackFloatsInto(rows.values(), scratch_rows_[i]);
    if (!unpacked.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows of embedding table ", rows.table(), " have the wrong length for ",
                       scratch_keys_[i].size(), " keys of width ", dim, ": ", unpacked.message()));
    }
    if (!tensor::AllFinite(scratch_rows_[i])) {
      *reason = RejectionReason::kNonFinite;
      return absl::InvalidArgumentError(absl::StrCat("embedding gradient of table ", rows.table(),
                                                     " has a non-finite value at element ",
                                                     tensor::FirstNonFinite(scratch_rows_[i])));
    }
    // Each key once per table: the aggregator weights a push's rows by its sample count once.
    absl::flat_hash_set<uint64_t> keys_seen;
    keys_seen.reserve(scratch_keys_[i].size());
    for (const uint64_t key : scratch_keys_[i]) {
      if (!keys_seen.insert(key).second) {
        *reason = RejectionReason::kDuplicateKey;
        return absl::InvalidArgumentError(
            absl::StrCat("key ", key, " appears twice in table ", rows.table()));
      }
    }
    scratch_sparse_.push_back({rows.table(), scratch_keys_[i], scratch_rows_[i]});
  }
  return absl::OkStatus();
}

void ShardCore::ApplyReadyUpdates(std::vector<ReadyPull>* ready) {
  bool applied = false;
  while (aggregator_.UpdateReady()) {
    const absl::Time start = clock_->Now();
    const v1::Mode update_mode = aggregator_.mode();
    const int64_t samples = aggregator_.TakeUpdate(mean_gradient_, &sparse_update_);
    applied = true;
    // A sync barrier every member filled with dropped (stale) gradients: the version moved on,
    // no update to apply.
    if (samples == 0) continue;
    // A module's buffers (ADR 0018) take the mean of the changes the workers' steps made to them,
    // not the optimizer's step: their "gradient" is zero to the optimizer (a zero gradient moves
    // no rule whose state is zero, and theirs stays zero), then the change is added.
    buffer_change_.clear();
    for (const auto& [offset, length] : buffer_spans_) {
      const auto change = mean_gradient_.begin() + offset;
      buffer_change_.insert(buffer_change_.end(), change, change + length);
      std::fill(change, change + length, 0.0f);
    }
    if (MeasuresStalenessCost(update_mode)) {
      gradient_statistics_.AddUpdate(mean_gradient_, samples);
    } else {
      gradient_statistics_.Reset();
    }
    // The schedule advances by the global batches the update consumed: one in sync and gba.
    const optim::Step step = optimizer_->Apply(
        params_, mean_gradient_,
        static_cast<double>(samples) / static_cast<double>(aggregator_.global_batch()));
    size_t changed = 0;
    for (const auto& [offset, length] : buffer_spans_) {
      for (int64_t i = 0; i < length; ++i) params_[offset + i] += buffer_change_[changed++];
    }
    published_.reset();  // pullers still sending the old copy keep it alive
    // Lazy: only the rows this update touched move; Adam's bias correction uses the shard's
    // update count (TensorFlow's LazyAdam does the same with the global step).
    for (size_t t = 0; t < sparse_update_.tables.size(); ++t) {
      const aggregation::SparseUpdate::Table& rows = sparse_update_.tables[t];
      KeepRowsForEvalPoints(static_cast<int32_t>(t), rows.keys);
      tables_[t]->ApplyBatch(rows.keys, rows.rows, step);
    }
    // Eviction's bounded sweep (EmbeddingTable::EndUpdate): a share of the table per update.
    for (const auto& table : tables_) table->EndUpdate(step.index);
    MaybeMakeEvalPoint();
    ++counts_.updates;
    metrics_->SetLearningRate(step.learning_rate);
    metrics_->CountUpdate(absl::ToDoubleSeconds(clock_->Now() - start));
  }
  if (!applied) return;
  if (!tables_.empty()) PublishTables();
  AnswerDuePulls(ready);
}

void ShardCore::AnswerDuePulls(std::vector<ReadyPull>* ready) {
  metrics_->SetVersion(aggregator_.version());
  const int64_t version = aggregator_.version();
  auto due = std::stable_partition(pending_pulls_.begin(), pending_pulls_.end(),
                                   [&](const PendingPull& p) { return p.min_version > version; });
  for (auto it = due; it != pending_pulls_.end(); ++it) {
    ready->push_back(
        {std::move(it->done), MakeResponse(it->request_id, it->rows, it->puller, it->since)});
  }
  pending_pulls_.erase(due, pending_pulls_.end());
}

PullReply ShardCore::MakeResponse(int64_t request_id, const std::vector<RowRequest>& rows,
                                  const Puller& puller, absl::Time since) {
  PullReply reply;
  v1::PullResponse& response = reply.response;
  response.set_request_id(request_id);
  response.set_version(aggregator_.version());
  response.set_mode(aggregator_.mode());
  // The buffer-aware look-ahead (ADR 0007, "The pending update"): in gba a worker's gradient
  // lands `landing` updates after the version it pulls, predicted from the buffer's fill and the
  // workers' push cadence (aggregation::PushCadence). Sync would have computed it on the
  // parameters the pending update produces; the shard knows most of that update already (the
  // mean of the gradients buffered for it), so it serves those parameters, plus the velocity's
  // drift for any further updates. Rules with a velocity only (momentum, Nesterov, Adam: where
  // staleness costs most, as implicit extra momentum); SGD and Adagrad serve the parameters as
  // they are. landing = 0 (sync, a fresh gradient, the evaluator) changes nothing.
  const int64_t landing =
      puller.trains && LooksAhead(aggregator_.mode()) && optimizer_->velocity_decay() > 0
          ? cadence_.LandingUpdates(puller.worker, aggregator_.buffered_samples(),
                                    aggregator_.global_batch(), aggregator_.members())
          : 0;
  if (landing > 0) {
    // Each puller's landing is its own: these values are written for this reply alone.
    auto look_ahead = std::make_shared<std::vector<float>>(params_.size());
    pending_gradient_.resize(params_.size());
    const bool pending = aggregator_.BufferedMean(pending_gradient_);
    // A module's buffers move by their pushed change, not by a rule (ADR 0018): served as they are.
    for (const auto& [offset, length] : buffer_spans_) {
      std::fill_n(pending_gradient_.begin() + offset, length, 0.0f);
    }
    optimizer_->LookAheadPending(
        params_, pending ? std::span<const float>(pending_gradient_) : std::span<const float>(),
        landing, *look_ahead);
    reply.values = std::move(look_ahead);
    response.set_look_ahead_updates(static_cast<double>(landing));
    metrics_->ObserveLookAhead(static_cast<double>(landing));
  } else {
    if (published_ == nullptr) published_ = std::make_shared<const std::vector<float>>(params_);
    reply.values = published_;
  }
  const bool create_rows = puller.trains;
  bool created = false;
  for (const RowRequest& request : rows) {
    embedding::EmbeddingTable& table = *tables_[request.table];
    const size_t dim = static_cast<size_t>(table.dim());
    std::vector<float> values(request.keys.size() * dim);
    const int64_t before = table.size();
    if (create_rows) {
      // Admission turns a key's zeros into its initial value (without it, a created row reads
      // as it did before).
      if (table.admits()) KeepRowsForEvalPoints(request.table, request.keys);
      table.PullBatch(request.keys, values);
    } else {
      for (size_t k = 0; k < request.keys.size(); ++k) {
        table.Peek(request.keys[k], std::span<float>(values).subspan(k * dim, dim));
      }
    }
    created = created || table.size() != before;
    v1::SparseRows* out = response.add_sparse();
    out->set_table(request.table);
    out->set_keys(tensor::PackKeys(request.keys));
    out->set_values(tensor::PackFloats(values));
  }
  // Rows created show at once; admission's counts of reads follow with the next update.
  if (created) PublishTables();
  const double held = absl::ToDoubleSeconds(clock_->Now() - since);
  response.set_held_seconds(held);
  metrics_->ObservePullHeld(held);
  return reply;
}

void ShardCore::MaybeMakeEvalPoint() {
  if (eval_every_ <= 0) return;
  const int64_t reached =
      static_cast<int64_t>(std::floor(optimizer_->progress() / static_cast<double>(eval_every_)));
  if (reached <= eval_points_reached_) return;
  eval_points_reached_ = reached;
  if (!eval_points_wanted_) return;
  // The oldest points the evaluator is not reading make room (it lags: it reads the newer ones).
  while (eval_points_.size() >= kMaxEvalPoints) {
    auto oldest = std::find_if(eval_points_.begin(), eval_points_.end(),
                               [&](const EvalPoint& p) { return p.number != eval_point_reading_; });
    if (oldest == eval_points_.end()) break;
    eval_points_.erase(oldest);
  }
  if (published_ == nullptr) published_ = std::make_shared<const std::vector<float>>(params_);
  EvalPoint point;
  point.number = reached;
  point.version = aggregator_.version();
  point.made = clock_->Now();
  point.examples = std::llround(optimizer_->progress() * aggregator_.global_batch());
  point.values = published_;  // immutable: the next update publishes a new copy
  point.rows_then.resize(tables_.size());
  eval_points_.push_back(std::move(point));
}

void ShardCore::KeepRowsForEvalPoints(int32_t table, std::span<const uint64_t> keys) {
  if (eval_points_.empty()) return;
  const size_t dim = static_cast<size_t>(tables_[table]->dim());
  for (EvalPoint& point : eval_points_) {
    EvalPoint::RowsThen& then = point.rows_then[table];
    for (uint64_t key : keys) {
      auto [it, inserted] = then.offset.try_emplace(key, then.values.size());
      if (!inserted) continue;
      then.values.resize(then.values.size() + dim);
      tables_[table]->Peek(key, std::span<float>(then.values).subspan(it->second, dim));
    }
  }
}

PullReply ShardCore::MakePointResponse(const v1::PullRequest& request,
                                       const std::vector<RowRequest>& rows) {
  eval_points_wanted_ = true;
  PullReply reply;
  v1::PullResponse& response = reply.response;
  response.set_request_id(request.request_id());
  response.set_version(aggregator_.version());
  response.set_mode(aggregator_.mode());
  auto point = std::find_if(eval_points_.begin(), eval_points_.end(),
                            [&](const EvalPoint& p) { return p.number >= request.eval_point(); });
  // The evaluator never asks for an older point again.
  eval_points_.erase(eval_points_.begin(), point);
  point = eval_points_.begin();
  if (point == eval_points_.end()) {
    reply.values = std::make_shared<const std::vector<float>>();
    return reply;
  }
  response.set_eval_point(point->number);
  response.set_version(point->version);
  response.set_point_age_seconds(absl::ToDoubleSeconds(clock_->Now() - point->made));
  response.set_point_examples(point->examples);
  reply.values = point->values;
  for (const RowRequest& wanted : rows) {
    const embedding::EmbeddingTable& table = *tables_[wanted.table];
    const EvalPoint::RowsThen& then = point->rows_then[wanted.table];
    const size_t dim = static_cast<size_t>(table.dim());
    std::vector<float> values(wanted.keys.size() * dim);
    for (size_t k = 0; k < wanted.keys.size(); ++k) {
      const std::span<float> out = std::span<float>(values).subspan(k * dim, dim);
      if (auto it = then.offset.find(wanted.keys[k]); it != then.offset.end()) {
        std::copy_n(then.values.begin() + static_cast<std::ptrdiff_t>(it->second), dim,
                    out.begin());
      } else {
        table.Peek(wanted.keys[k], out);
      }
    }
    v1::SparseRows* out = response.add_sparse();
    out->set_table(wanted.table);
    out->set_keys(tensor::PackKeys(wanted.keys));
    out->set_values(tensor::PackFloats(values));
  }
  if (request.release_point()) {
    if (request.keep_point()) {
      kept_point_ = std::make_shared<const v1::ShardCheckpoint>(PointCheckpoint(*point));
    }
    eval_points_.pop_front();
    eval_point_reading_ = 0;
  } else {
    eval_point_reading_ = point->number;
  }
  return reply;
}

void ShardCore::Deliver(std::vector<ReadyPull>& ready) {
  for (ReadyPull& pull : ready) pull.done(std::move(pull.reply));
}

absl::Status ShardCore::Pull(const Puller& puller, const v1::PullRequest& request,
                             PullCallback done) {
  std::vector<RowRequest> rows;
  for (const v1::SparseRows& wanted : request.sparse()) {
    RowRequest row{wanted.table(), {}};
    absl::Status valid = tensor::UnpackKeys(wanted.keys(), row.keys);
    RejectionReason reason = RejectionReason::kWrongShape;
    if (valid.ok()) {
      valid = ValidateKeys(wanted.table(), row.keys);
      if (wanted.table() >= 0 && wanted.table() < TableCount()) {
        reason = RejectionReason::kWrongShard;
      }
    }
    if (!valid.ok()) {
      metrics_->CountRejection(reason);
      return valid;
    }
    rows.push_back(std::move(row));
  }
  PullReply reply;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    // Only a sync barrier holds pulls; gba and async always serve the newest parameters. A
    // member that has filled its place in the current barrier waits for its release, whatever
    // it asks for: its next gradient belongs to the next version.
    const int64_t min_version = aggregator_.HasPushedForVersion(puller.worker)
                                    ? std::max(request.min_version(), aggregator_.version() + 1)
                                    : request.min_version();
    if (request.eval_point() > 0) {
      reply = MakePointResponse(request, rows);
    } else if (HasBarrier(aggregator_.mode()) && aggregator_.version() < min_version) {
      pending_pulls_.push_back(
          {puller, request.request_id(), min_version, std::move(rows), now, std::move(done)});
      return absl::OkStatus();
    } else {
      reply = MakeResponse(request.request_id(), rows, puller, now);
    }
  }
  done(std::move(reply));
  return absl::OkStatus();
}

void ShardCore::CancelPulls(const void* owner) {
  absl::MutexLock lock(&mu_);
  std::erase_if(pending_pulls_, [owner](const PendingPull& p) { return p.puller.owner == owner; });
}

void ShardCore::SetMembership(const v1::Membership& membership) {
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    // Older than the one applied: it arrived late (see the header).
    if (membership.generation() > 0 && membership.generation() < membership_generation_) return;
    ApplyMembership(membership, &ready);
  }
  Deliver(ready);
}

void ShardCore::ResetMembership(const v1::Membership& membership) {
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    ApplyMembership(membership, &ready);
  }
  Deliver(ready);
}

void ShardCore::ApplyMembership(const v1::Membership& membership, std::vector<ReadyPull>* ready) {
  membership_generation_ = membership.generation();
  aggregator_.SetMembership(membership);
  ApplyReadyUpdates(ready);  // a barrier may have been waiting only on departed workers
}

void ShardCore::SetMode(v1::Mode mode) {
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    if (!IsShardMode(mode)) return;
    // A new regime's cadence: a sync barrier paces every worker alike.
    if (mode != aggregator_.mode()) cadence_.Reset();
    aggregator_.SetMode(mode);
    metrics_->SetMode(mode);
    ApplyReadyUpdates(&ready);     // gba->sync flushes the old buffer as one update
    gradient_statistics_.Reset();  // the velocity is measured over sync updates only
    // Pulls held for a version that a barrier will now never produce on its own (sync->gba
    // keeps the version) are answered with the newest parameters: gba pulls never wait.
    if (!HasBarrier(mode)) {
      for (PendingPull& p : pending_pulls_) {
        ready.push_back({std::move(p.done), MakeResponse(p.request_id, p.rows, p.puller, p.since)});
      }
      pending_pulls_.clear();
    }
  }
  Deliver(ready);
}

absl::Status ShardCore::ApplyModeCommand(const v1::SetMode& command) {
  SetMode(command.mode());
  std::optional<v1::ShardCheckpoint> point;
  {
    absl::MutexLock lock(&mu_);
    point.swap(rollback_point_);
  }
  absl::Status rolled;
  if (command.roll_back()) {
    rolled =
        point.has_value()
            ? RollBack(*point)
            : absl::FailedPreconditionError("told to roll back, but no rollback point is kept");
  }
  if (command.keep_rollback_point()) {
    v1::ShardCheckpoint kept = Snapshot();
    absl::MutexLock lock(&mu_);
    rollback_point_ = std::move(kept);
  }
  return rolled;
}

bool ShardCore::has_rollback_point() const {
  absl::MutexLock lock(&mu_);
  return rollback_point_.has_value();
}

absl::Status ShardCore::RollBack(const v1::ShardCheckpoint& point) {
  SYNCOPATE_ASSIGN_OR_RETURN(checkpoint::RestoredShard restored, BuildRestored({point}));
  std::vector<ReadyPull> ready;
  {
    absl::MutexLock lock(&mu_);
    Adopt(std::move(restored));
    // One version on, so gradients computed on the abandoned parameters arrive stale.
    aggregator_.RestoreVersion(aggregator_.version() + 1);
    AnswerDuePulls(&ready);
  }
  Deliver(ready);
  return absl::OkStatus();
}

ShardStats ShardCore::Stats() const {
  absl::MutexLock lock(&mu_);
  ShardStats stats = counts_;
  stats.version = aggregator_.version();
  stats.mode = aggregator_.mode();
  stats.barrier_waiting_for = aggregator_.BarrierWaitingFor();
  stats.pending_pulls = static_cast<int64_t>(pending_pulls_.size());
  for (const auto& table : tables_) stats.embedding_rows += table->size();
  stats.staleness_cost = gradient_statistics_.Current();
  return stats;
}

v1::ShardReport ReportOf(const ShardStats& stats) {
  v1::ShardReport report;
  report.set_version(stats.version);
  report.set_mode(stats.mode);
  report.set_updates(stats.updates);
  for (int32_t w : stats.barrier_waiting_for) report.add_barrier_waiting_for(w);
  *report.mutable_gradients() = stats.gradients;
  v1::StalenessCostReport* cost = report.mutable_staleness_cost();
  cost->set_versions(stats.staleness_cost.versions);
  cost->set_velocity_squared(stats.staleness_cost.velocity_squared);
  cost->set_velocity_drift_squared(stats.staleness_cost.velocity_drift_squared);
  cost->set_velocity_drift_squared_standard_error(
      stats.staleness_cost.velocity_drift_squared_standard_error);
  return report;
}

std::vector<float> ShardCore::Parameters() const {
  absl::MutexLock lock(&mu_);
  return params_;
}

std::vector<float> ShardCore::EmbeddingRow(int32_t table, uint64_t key) const {
  absl::MutexLock lock(&mu_);
  std::vector<float> row(static_cast<size_t>(tables_.at(table)->dim()));
  tables_[table]->Peek(key, row);
  return row;
}

namespace {

// `slice` of a shard whose values start at flat offset `flat_begin`, its values from `values`
// (the shard's [flat_begin, flat_end)); the caller adds optimizer state.
v1::CheckpointSlice* AddCheckpointSlice(const v1::TensorSlice& slice, int64_t flat_begin,
                                        std::span<const float> values,
                                        v1::ShardCheckpoint& checkpoint) {
  v1::CheckpointSlice* out = checkpoint.add_slices();
  out->set_tensor(slice.tensor());
  out->set_tensor_offset(slice.tensor_offset());
  out->set_length(slice.length());
  out->set_values(
      tensor::PackFloats(values.subspan(slice.flat_offset() - flat_begin, slice.length())));
  return out;
}

}  // namespace

v1::ShardCheckpoint ShardCore::CheckpointHeader() const {
  v1::ShardCheckpoint checkpoint;
  checkpoint.set_job_id(assignment_.job().job_id());
  checkpoint.set_shard_id(assignment_.partition().shard_id());
  checkpoint.set_num_shards(assignment_.job().num_shards());
  checkpoint.set_created_unix_millis(absl::ToUnixMillis(clock_->Now()));
  *checkpoint.mutable_job() = assignment_.job();
  return checkpoint;
}

std::shared_ptr<const v1::ShardCheckpoint> ShardCore::TakeKeptPoint() {
  absl::MutexLock lock(&mu_);
  return std::exchange(kept_point_, nullptr);
}

v1::ShardCheckpoint ShardCore::PointCheckpoint(const EvalPoint& point) const {
  v1::ShardCheckpoint checkpoint = CheckpointHeader();
  checkpoint.set_version(point.version);
  checkpoint.set_eval_point(point.number);
  checkpoint.set_mode(aggregator_.mode());
  checkpoint.set_optimizer(kKeptOptimizer);
  for (const v1::TensorSlice& slice : assignment_.partition().slices()) {
    AddCheckpointSlice(slice, flat_begin_, *point.values, checkpoint);
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const embedding::EmbeddingTable& table = *tables_[t];
    const EvalPoint::RowsThen& then = point.rows_then[t];
    const size_t dim = static_cast<size_t>(table.dim());
    std::vector<uint64_t> keys;
    std::vector<float> values;
    keys.reserve(static_cast<size_t>(table.size()));
    values.reserve(static_cast<size_t>(table.size()) * dim);
    // Each row as it was at the point: its kept old value if it changed since, else its value.
    table.ForEach([&](uint64_t key, std::span<const float> value, std::span<const float>, int64_t) {
      keys.push_back(key);
      if (auto it = then.offset.find(key); it != then.offset.end()) {
        const auto begin = then.values.begin() + static_cast<std::ptrdiff_t>(it->second);
        values.insert(values.end(), begin, begin + static_cast<std::ptrdiff_t>(dim));
      } else {
        values.insert(values.end(), value.begin(), value.end());
      }
    });
    v1::EmbeddingSlice* out = checkpoint.add_embeddings();
    out->set_table(table.spec().name());
    out->set_dim(table.dim());
    out->set_keys(tensor::PackKeys(keys));
    out->set_values(tensor::PackFloats(values));
  }
  return checkpoint;
}

v1::ShardCheckpoint ShardCore::Snapshot() const {
  v1::ShardCheckpoint checkpoint = CheckpointHeader();
  absl::MutexLock lock(&mu_);
  checkpoint.set_version(aggregator_.version());
  checkpoint.set_mode(aggregator_.mode());
  checkpoint.set_optimizer(std::string(optimizer_->name()));
  const std::vector<std::span<float>> state = optimizer_->state_vectors();
  for (const v1::TensorSlice& slice : assignment_.partition().slices()) {
    const int64_t offset = slice.flat_offset() - flat_begin_;
    v1::CheckpointSlice* out = AddCheckpointSlice(slice, flat_begin_, params_, checkpoint);
    for (std::span<float> vector : state) {
      out->add_optimizer_state(tensor::PackFloats(vector.subspan(offset, slice.length())));
    }
  }
  checkpoint.set_optimizer_steps(optimizer_->steps());
  checkpoint.set_schedule_progress(optimizer_->progress());
  const int slots = row_rule_->num_slots();
  for (const auto& table : tables_) {
    const size_t dim = static_cast<size_t>(table->dim());
    std::vector<uint64_t> keys;
    std::vector<float> values;
    std::vector<std::vector<float>> state(static_cast<size_t>(slots));
    keys.reserve(static_cast<size_t>(table->size()));
    values.reserve(static_cast<size_t>(table->size()) * dim);
    std::vector<uint64_t> last_touched;
    table->ForEach([&](uint64_t key, std::span<const float> value, std::span<const float> slot,
                       int64_t touched) {
      keys.push_back(key);
      if (table->evicts()) last_touched.push_back(static_cast<uint64_t>(touched));
      values.insert(values.end(), value.begin(), value.end());
      for (int k = 0; k < slots; ++k) {
        const auto begin = slot.begin() + static_cast<std::ptrdiff_t>(k * dim);
        state[k].insert(state[k].end(), begin, begin + static_cast<std::ptrdiff_t>(dim));
      }
    });
    v1::EmbeddingSlice* out = checkpoint.add_embeddings();
    out->set_table(table->spec().name());
    out->set_dim(table->dim());
    out->set_keys(tensor::PackKeys(keys));
    out->set_values(tensor::PackFloats(values));
    for (const std::vector<float>& vector : state) {
      out->add_optimizer_state(tensor::PackFloats(vector));
    }
    if (table->evicts()) out->set_last_touched(tensor::PackKeys(last_touched));
    if (table->admits()) *out->mutable_admission() = table->admission()->State();
  }
  return checkpoint;
}

absl::Status ShardCore::Restore(const std::vector<v1::ShardCheckpoint>& sources) {
  SYNCOPATE_ASSIGN_OR_RETURN(checkpoint::RestoredShard restored, BuildRestored(sources));
  absl::MutexLock lock(&mu_);
  const int64_t version = restored.version;
  Adopt(std::move(restored));
  aggregator_.RestoreVersion(version);
  metrics_->SetVersion(version);
  return absl::OkStatus();
}

absl::Status ShardCore::WarmStart(const std::vector<v1::ShardCheckpoint>& sources) {
  SYNCOPATE_ASSIGN_OR_RETURN(checkpoint::RestoredShard restored,
                             BuildRestored(sources, /*parameters_only=*/true));
  absl::MutexLock lock(&mu_);
  Adopt(std::move(restored));
  return absl::OkStatus();
}

absl::StatusOr<checkpoint::RestoredShard> ShardCore::BuildRestored(
    const std::vector<v1::ShardCheckpoint>& sources, bool parameters_only) const {
  checkpoint::RestoreTarget target;
  target.assignment = &assignment_;
  target.row_rule = row_rule_.get();
  target.parameters_only = parameters_only;
  {
    absl::MutexLock lock(&mu_);
    target.optimizer = std::string(optimizer_->name());
    target.optimizer_vectors = static_cast<int>(optimizer_->state_vectors().size());
  }
  // Built outside the lock from immutable inputs; adopted only once it all checked out.
  return checkpoint::RestoreShard(target, sources);
}

void ShardCore::Adopt(checkpoint::RestoredShard restored) {
  PublishTables();  // the outgoing tables' last events
  tables_ = std::move(restored.tables);
  params_ = std::move(restored.parameters);
  published_.reset();
  optimizer_->set_steps(restored.optimizer_steps);
  optimizer_->set_progress(restored.schedule_progress);
  std::vector<std::span<float>> state = optimizer_->state_vectors();
  for (size_t k = 0; k < state.size(); ++k) {
    std::copy(restored.optimizer_state[k].begin(), restored.optimizer_state[k].end(),
              state[k].begin());
  }
  PublishTables();
  gradient_statistics_.Reset();
  cadence_.Reset();
  // The kept points' copies of rows were taken against the outgoing tables.
  eval_points_.clear();
  eval_point_reading_ = 0;
  eval_points_reached_ =
      eval_every_ > 0 ? static_cast<int64_t>(
                            std::floor(optimizer_->progress() / static_cast<double>(eval_every_)))
                      : 0;
}

}  // namespace syncopate::shard
