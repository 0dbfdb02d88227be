// A parameter shard's state machine, independent of gRPC: its slice of the parameters, the
// optimizer, the global-batch aggregator and the pulls waiting for a version.
//
// Every push is validated before it reaches the aggregator (size, finiteness, sample count,
// membership, token, embedding keys); nothing invalid is ever applied, and each rejection is
// counted by reason.
// Besides its dense range the shard holds its share of every embedding table: the rows whose key
// embedding::OwnerShard maps to it, created on first touch by a worker's pull or push (or, with
// admission, once a worker's pulls have shown the key often enough), and evicted after each
// update's bounded sweep when idle too long (ADR 0010).
// Evaluation points (EvalSpec, issue 31): once an evaluator has asked for one, the shard keeps
// the parameters as they were each time its applied global batches cross a multiple of
// every_global_batches, with the time it got there, until the evaluator has read them; embedding
// rows copy on write (a row's old value is kept when an update or an admission first changes it
// after the point). A row evicted while a point is kept reads, at that point, as it reads after
// the eviction (its initial value): eviction only takes rows idle for evict_after_updates updates.
// Thread-safety: thread-safe. Pull callbacks run without the shard's lock held, on the thread
// that made the version available (a push, a membership change or a mode switch).
#ifndef SYNCOPATE_LIBS_SHARD_SHARD_CORE_H_
#define SYNCOPATE_LIBS_SHARD_SHARD_CORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/aggregation/global_batch_aggregator.h"
#include "libs/aggregation/gradient_statistics.h"
#include "libs/aggregation/push_cadence.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/checkpoint/shard_restore.h"
#include "libs/common/clock.h"
#include "libs/embedding/embedding_table.h"
#include "libs/optim/optimizer.h"
#include "libs/shard/rejection_reason.h"
#include "libs/shard/shard_metrics.h"
#include "libs/tensor/packed.h"
#include "syncopate/v1/checkpoint.pb.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/coordinator.pb.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::shard {

// The shard's own limit on one push message (its whole serialized size, dense gradient and
// sparse rows alike). It sits well below the transport's limit (rpc::kMaxMessageBytes, where
// gRPC itself refuses a message before any handler sees it, uncounted), so an oversize push
// reaches the shard, is answered RESOURCE_EXHAUSTED and is counted as "oversize".
inline constexpr int64_t kMaxPushBytes = int64_t{32} << 20;

struct ShardStats {
  int64_t version = 0;
  v1::Mode mode = v1::MODE_UNSPECIFIED;
  int64_t updates = 0;
  v1::GradientCounters gradients;  // pushes by outcome, as reported to the coordinator
  std::vector<int32_t> barrier_waiting_for;
  int64_t pending_pulls = 0;
  int64_t embedding_rows = 0;
  StalenessCost staleness_cost;  // measured in sync (aggregation::GradientStatistics)
};

// What a shard tells the coordinator of its state in a periodic report (version, mode, pushes
// by outcome, the barrier's missing workers, the staleness cost), as ShardNode and the
// simulator both send it; the transport's own fields (final, wire bytes, the staleness
// histogram) are the sender's to add.
v1::ShardReport ReportOf(const ShardStats& stats);
// How often a shard reports: the coordinator's status view and mode policy feed on it.
inline constexpr absl::Duration kReportInterval = absl::Milliseconds(500);

// Who pulls: the stream that asked (CancelPulls drops its pending pulls), the worker id, and
// whether it trains. A training worker's pull creates the rows it asks for and, in gba, gets the
// look-ahead parameters; the evaluator's reads absent rows as their initial value without storing
// them and always sees the parameters as they are.
struct Puller {
  const void* owner = nullptr;
  int32_t worker = -1;
  bool trains = true;
};

// A pull's answer: the response without its dense values, which travel beside it so that every
// puller of one version shares one immutable copy and the transport sends it without copying
// (rpc::EncodeWithPayload; ADR 0012).
struct PullReply {
  v1::PullResponse response;                         // `values` empty
  std::shared_ptr<const std::vector<float>> values;  // the shard's [flat_begin, flat_end)

  // The response with its values packed in (in-process callers, tests).
  v1::PullResponse ToMessage() &&;
};

class ShardCore {
 public:
  using PullCallback = std::function<void(PullReply)>;

  // Initialises the partition from its initializers. `metrics` (not owned) null means
  // ShardMetrics::NoOp(). Pushes whose
  // serialized size exceeds `max_push_bytes` are rejected (RESOURCE_EXHAUSTED, "oversize").
  static absl::StatusOr<std::unique_ptr<ShardCore>> Create(const v1::ShardAssignment& assignment,
                                                           Clock* clock, ShardMetrics* metrics,
                                                           int64_t max_push_bytes = kMaxPushBytes);

  // Validates and aggregates one gradient from `worker`; applies every update that becomes
  // ready. The ack says what happened (rejections carry a gRPC status code and message).
  v1::PushAck Push(int32_t worker, const v1::PushRequest& push);
  // The same, with the dense gradient's bytes beside the request, in the pieces they arrived in
  // (`push.gradient()` is then ignored): copied once, into the aggregation's scratch.
  v1::PushAck Push(int32_t worker, const v1::PushRequest& push, const tensor::ByteChunks& gradient);
  // A push the transport refused before it reached Push (a gradient said to be in shared memory
  // the stream has not): counted and acknowledged as every rejection is, never aggregated.
  v1::PushAck RejectPush(const v1::PushRequest& push, const absl::Status& status,
                         RejectionReason reason);

  // An evaluation point's read (request.eval_point() > 0) is answered at once, from the first
  // kept point at or after the one asked for (PullResponse.eval_point 0 and no values when there
  // is none yet). Otherwise: answers with the parameters (and the requested embedding rows) once
  // the version is >= request.min_version(); `done` runs immediately or when the version arrives
  // (sync: when the barrier releases). A pending pull is dropped (never called) by CancelPulls with
  // the same owner. Rows a training worker pulls are created on first touch. In gba, a training
  // worker whose optimizer has a velocity gets the parameters extrapolated by the staleness its
  // gradient will likely carry (look-ahead, ADR 0007; PullResponse.look_ahead_updates says by
  // how many updates). A malformed row request (unknown table, partial key, a key another shard
  // owns) is refused with INVALID_ARGUMENT and counted; `done` is then never called.
  absl::Status Pull(const Puller& puller, const v1::PullRequest& request, PullCallback done);
  void CancelPulls(const void* owner);

  // A membership update from the coordinator. Within one coordinator session generations only
  // grow, but the coordinator sends from several threads, so two updates decided a fraction of a
  // millisecond apart can arrive swapped: one older than the newest applied is ignored (applying
  // it left a sync barrier waiting on a member the coordinator had added; faults_test, CI-like
  // load, 2026-11-27). Generation 0 (a job not yet started) is always applied.
  void SetMembership(const v1::Membership& membership);
  // The membership of a (re)assignment, which starts a coordinator session: taken whatever its
  // generation, since a restarted coordinator counts generations from the start again.
  void ResetMembership(const v1::Membership& membership);
  void SetMode(v1::Mode mode);
  // A mode command from the coordinator: SetMode, then, if it says roll_back, a return to the
  // kept rollback point; if it says keep_rollback_point, the state after the switch becomes the
  // new point. Every command drops the previous point.
  // A roll-back returns parameters, optimizer state, the schedule's position and embedding rows
  // (rows created since are dropped) to the point: the abandoned updates are undone, and only
  // the data they consumed is spent (a run that restarts from before a loss spike skips the
  // batches it saw: PaLM, Chowdhery et al. 2022, §5.1). A schedule keyed on `stop` then ends
  // short of its last step by the abandoned updates (simulated: this ended 0.2-0.6 points
  // higher than keeping the schedule's position, which skips that part of the schedule). The
  // version moves on by one, so gradients computed on the abandoned parameters arrive stale
  // (dropped in sync) and waiting pulls are answered with the restored ones.
  // FAILED_PRECONDITION when told to roll back with no point kept (or the point did not
  // restore): the mode is switched all the same.
  absl::Status ApplyModeCommand(const v1::SetMode& command);
  // Whether a rollback point is kept (tests).
  bool has_rollback_point() const;

  ShardStats Stats() const;
  int64_t flat_begin() const { return flat_begin_; }
  int64_t flat_end() const { return flat_end_; }
  int64_t size() const { return flat_end_ - flat_begin_; }
  int32_t shard_id() const { return shard_id_; }
  int32_t num_shards() const { return num_shards_; }
  // The job of the assignment: a Train hello naming another job is refused.
  const std::string& job_id() const { return assignment_.job().job_id(); }
  // A copy of the current parameters (tests, checkpoints).
  std::vector<float> Parameters() const;
  // The current value of one embedding row (its initial value if never touched); tests.
  std::vector<float> EmbeddingRow(int32_t table, uint64_t key) const;

  // The shard's parameters and optimizer state by global coordinates (tensor + offset).
  v1::ShardCheckpoint Snapshot() const;
  // The evaluation point the evaluator last released with keep_point (the version the job keeps,
  // ADR 0017), as a checkpoint of its parameters only (no optimizer state: `optimizer` is
  // kKeptOptimizer, so it never restores as a training state); once: null when none came since
  // the last call. The shard node writes it beside its checkpoints.
  std::shared_ptr<const v1::ShardCheckpoint> TakeKeptPoint();
  static constexpr const char* kKeptOptimizer = checkpoint::kParametersOnly;
  // Restores parameters, optimizer state and version from checkpoints of any partitioning of
  // the same model: each of this shard's slices is filled from the overlapping slices of the
  // sources. FAILED_PRECONDITION (nothing changed) unless the sources cover every element, or
  // when they come from a different optimizer or job. The version becomes the newest source's.
  absl::Status Restore(const std::vector<v1::ShardCheckpoint>& sources);
  // A warm start (ModelSpec.warm_start): the parameters of `sources` (checkpoints of any job,
  // optimizer and shard count, or an export as one checkpoint), with fresh optimizer state at
  // version 0. FAILED_PRECONDITION (nothing changed) unless they cover every parameter.
  absl::Status WarmStart(const std::vector<v1::ShardCheckpoint>& sources);

 private:
  // The rows one pull asked for, validated and unpacked.
  struct RowRequest {
    int32_t table;
    std::vector<uint64_t> keys;
  };
  struct PendingPull {
    Puller puller;
    int64_t request_id;
    int64_t min_version;
    std::vector<RowRequest> rows;
    absl::Time since;
    PullCallback done;
  };
  struct ReadyPull {
    PullCallback done;
    PullReply reply;
  };
  // The parameters as they were once `number` * eval_every_ global batches had been applied.
  struct EvalPoint {
    int64_t number = 0;
    int64_t version = 0;
    absl::Time made;
    int64_t examples = 0;
    std::shared_ptr<const std::vector<float>> values;
    // Per table: the rows changed since the point was made, as they were then: key -> offset
    // into `values` (one flat buffer, no allocation per row).
    struct RowsThen {
      absl::flat_hash_map<uint64_t, size_t> offset;
      std::vector<float> values;
    };
    std::vector<RowsThen> rows_then;
  };

  ShardCore(const v1::ShardAssignment& assignment, Clock* clock, ShardMetrics* metrics,
            std::unique_ptr<optim::Optimizer> optimizer,
            std::unique_ptr<optim::UpdateRule> row_rule, int64_t max_push_bytes);

  // Applies every ready update and collects the pulls that became answerable.
  void ApplyReadyUpdates(std::vector<ReadyPull>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `membership` and applies what it makes ready.
  void ApplyMembership(const v1::Membership& membership, std::vector<ReadyPull>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the version and collects the pending pulls it answers.
  void AnswerDuePulls(std::vector<ReadyPull>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns to `point` (ApplyModeCommand's roll-back).
  absl::Status RollBack(const v1::ShardCheckpoint& point);
  // The shard `sources` restore into (checkpoint::RestoreShard against this shard's
  // assignment and optimizer); shared by Restore and RollBack.
  absl::StatusOr<checkpoint::RestoredShard> BuildRestored(
      const std::vector<v1::ShardCheckpoint>& sources, bool parameters_only = false) const;
  // Takes `restored`'s parameters, optimizer state and progress and embedding rows; the caller
  // sets the version.
  void Adopt(checkpoint::RestoredShard restored) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PullReply MakeResponse(int64_t request_id, const std::vector<RowRequest>& rows,
                         const Puller& puller, absl::Time since) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers an evaluation point's read (see Pull).
  PullReply MakePointResponse(const v1::PullRequest& request, const std::vector<RowRequest>& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `point`'s parameters (dense slices and every embedding row as it was then) as a
  // parameters-only checkpoint (TakeKeptPoint).
  v1::ShardCheckpoint PointCheckpoint(const EvalPoint& point) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checkpoint's identity fields (job, shard, layout, time).
  v1::ShardCheckpoint CheckpointHeader() const;
  // Makes the evaluation point the applied global batches have just reached, if any.
  void MaybeMakeEvalPoint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copy on write: the kept points keep the current values of `keys` of `table` unless they
  // already hold theirs; called before those rows change.
  void KeepRowsForEvalPoints(int32_t table, std::span<const uint64_t> keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts one push's outcome in `counts_.gradients` and in the metrics.
  void CountOutcome(v1::PushOutcome outcome, int64_t staleness) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::PushAck Reject(v1::PushAck ack, const absl::Status& status, RejectionReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unpacks and validates the sparse rows of a push into the scratch buffers; on failure the
  // rejection reason is written to `reason`.
  absl::Status UnpackSparsePush(const v1::PushRequest& push, RejectionReason* reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks that `table` exists and every key belongs to this shard.
  absl::Status ValidateKeys(int32_t table, std::span<const uint64_t> keys) const;
  // Publishes the shard's bytes, each table's rows and bytes, and the tables' admission and
  // eviction events since the last call.
  void PublishTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t TableCount() const { return table_count_; }
  static void Deliver(std::vector<ReadyPull>& ready);

  const int64_t flat_begin_;
  const int64_t flat_end_;
  const int32_t shard_id_;
  const int32_t num_shards_;
  const int32_t table_count_;  // embedding tables (fixed at creation)
  const v1::ShardAssignment assignment_;
  Clock* const clock_;
  ShardMetrics* const metrics_;
  const int64_t max_push_bytes_;
  const int64_t eval_every_;  // EvalSpec.every_global_batches (0: no evaluation points)

  mutable absl::Mutex mu_;
  // The generation of the membership applied last (see SetMembership).
  int64_t membership_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> mean_gradient_ ABSL_GUARDED_BY(mu_);  // scratch for one update
  // (offset, length) in the shard's range of a PyTorch module's buffers (TensorSlice.buffer;
  // ADR 0018), fixed at creation, and the scratch that carries their change past the optimizer.
  std::vector<std::pair<int64_t, int64_t>> buffer_spans_;
  std::vector<float> buffer_change_ ABSL_GUARDED_BY(mu_);
  // The workers' push intervals, for the look-ahead's landing prediction (gba).
  aggregation::PushCadence cadence_ ABSL_GUARDED_BY(mu_);
  std::vector<float> pending_gradient_ ABSL_GUARDED_BY(mu_);  // MakeResponse's scratch
  std::unique_ptr<optim::Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  // What staleness would cost, measured from the sync updates (reported to the coordinator).
  aggregation::GradientStatistics gradient_statistics_ ABSL_GUARDED_BY(mu_);
  // The update rule of embedding rows (same spec as the dense optimizer; state lives in rows).
  std::unique_ptr<optim::UpdateRule> row_rule_;
  std::vector<std::unique_ptr<embedding::EmbeddingTable>> tables_ ABSL_GUARDED_BY(mu_);
  aggregation::SparseUpdate sparse_update_ ABSL_GUARDED_BY(mu_);  // scratch for one update
  // Scratch for one push's rows, per entry of its `sparse` field.
  std::vector<std::vector<uint64_t>> scratch_keys_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<float>> scratch_rows_ ABSL_GUARDED_BY(mu_);
  std::vector<aggregation::SparseGradient> scratch_sparse_ ABSL_GUARDED_BY(mu_);
  aggregation::GlobalBatchAggregator aggregator_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingPull> pending_pulls_ ABSL_GUARDED_BY(mu_);
  std::vector<float> scratch_gradient_ ABSL_GUARDED_BY(mu_);
  // The parameters as pulls of the current version see them, copied once for all its pullers;
  // null until the first such pull, and again whenever the parameters change.
  std::shared_ptr<const std::vector<float>> published_ ABSL_GUARDED_BY(mu_);
  ShardStats counts_ ABSL_GUARDED_BY(mu_);
  // The state to roll back to while the coordinator's LossGuard watches a gba stint.
  std::optional<v1::ShardCheckpoint> rollback_point_ ABSL_GUARDED_BY(mu_);
  // Evaluation points are made only once an evaluator has asked for one (a job without an
  // evaluator pays nothing); oldest first, at most kMaxEvalPoints besides the one being read.
  static constexpr size_t kMaxEvalPoints = 2;
  bool eval_points_wanted_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<EvalPoint> eval_points_ ABSL_GUARDED_BY(mu_);
  int64_t eval_point_reading_ ABSL_GUARDED_BY(mu_) = 0;   // served, not yet released
  int64_t eval_points_reached_ ABSL_GUARDED_BY(mu_) = 0;  // floor(global batches applied / k)
  std::shared_ptr<const v1::ShardCheckpoint> kept_point_ ABSL_GUARDED_BY(mu_);  // not yet taken
};

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_SHARD_CORE_H_
