// The coordinator's state machine, independent of gRPC: the job's lifecycle, membership,
// data leases, the stop condition and the cluster status. Sessions reach it through
// WorkerLink/ShardLink, so tests drive it with fakes and a FakeClock.
//
// Lifecycle: waiting -> running -> finishing -> draining -> done (libs/coordinator/job_phase.h).
// Thread-safety: thread-safe. Messages to links are sent after the lock is released, and reach
// each link in the order the core decided them, whichever thread sends (see Deliver).
#ifndef SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_CORE_H_
#define SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_CORE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/common/clock.h"
#include "libs/coordinator/coordinator_metrics.h"
#include "libs/coordinator/job_phase.h"
#include "libs/coordinator/mode_controller.h"
#include "libs/coordinator/progress_journal.h"
#include "libs/coordinator/status_builder.h"
#include "libs/data/lease_table.h"
#include "libs/job/model_kind.h"
#include "libs/rpc/wire_bytes.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::coordinator {

class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  virtual void Send(v1::CoordinatorToWorker message) = 0;
  virtual void Close(absl::Status status) = 0;
};

class ShardLink {
 public:
  virtual ~ShardLink() = default;
  virtual void Send(v1::CoordinatorToShard message) = 0;
  virtual void Close(absl::Status status) = 0;
};

// How often the coordinator's periodic work runs (CoordinatorCore::Tick): CoordinatorServer's
// ticker and the simulator's.
inline constexpr absl::Duration kTickInterval = absl::Milliseconds(200);

struct CoordinatorOptions {
  v1::JobSpec job;
  // job::DescribeModel(job), read once by whoever starts the coordinator: the shards' layout
  // (Create partitions it and hands out its initial values, then lets it go) and the size of the
  // training set the leases cover.
  job::ModelDescription model;
  Clock* clock = Clock::Real();
  // Not owned. The default counts into a registry nobody scrapes; null means the same.
  CoordinatorMetrics* metrics = CoordinatorMetrics::NoOp();
  // Once this long has passed with every shard but fewer than num_workers workers, the job
  // starts with the workers it has rather than waiting forever.
  absl::Duration startup_grace = absl::Seconds(60);
  // Hold the job in WAITING, however many have registered, until Release(): an operator (or a
  // test) checks placement, connectivity and metrics of a cluster that is up and not yet
  // training, then lets it go (`syncopate release`). The startup grace still counts from the
  // coordinator's start. A coordinator restarted into a job already under way never holds it.
  bool hold_start = false;
  // A worker that sends nothing (no step, no heartbeat; workers beat every second from their
  // hello) for max(this, 10 x its median step time) is declared gone. The bound counts from the
  // last message or from the welcome, whichever is later. The same bound, counted from its last
  // step (or its first request for work), removes a worker a shard's sync barrier waits for
  // while it beats but makes no step: a hung step must not hold every other worker forever.
  absl::Duration min_silence_timeout = absl::Seconds(10);
  // How long FINISHING waits for workers to leave and the final evaluation to arrive.
  absl::Duration finish_timeout = absl::Seconds(60);
  // Where the coordinator keeps its progress (null = nowhere). A coordinator restarted with the
  // same journal carries on the same job: examples, evaluations, worker ids, shard modes and the
  // data-lease table (completed blocks are not handed out again).
  std::shared_ptr<ProgressJournal> journal;
};

class CoordinatorCore {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(CoordinatorOptions options);

  // A worker or evaluator said hello. Returns its id, or an error to close the session with:
  // FAILED_PRECONDITION for a hello naming another job (counted as reason "wrong_job").
  absl::StatusOr<int32_t> WorkerHello(std::shared_ptr<WorkerLink> link,
                                      const v1::WorkerHello& hello);
  void WorkerMessage(int32_t worker_id, const v1::WorkerMessage& message);
  // The worker's session ended (stream closed, cancelled, or timed out). With `link`, only if
  // that is still the worker's current session.
  void WorkerGone(int32_t worker_id, const std::string& reason, const WorkerLink* link = nullptr);

  // FAILED_PRECONDITION (counted as "wrong_job") for a shard holding another job's parameters.
  absl::Status ShardHello(std::shared_ptr<ShardLink> link, const v1::ShardHello& hello);
  void ShardReport(int32_t shard_id, const v1::ShardReport& report);
  void ShardGone(int32_t shard_id);

  // Periodic work, one timer each: start the job, time out silent workers, end DRAINING, save
  // the progress, a round of mode control, checkpoint requests, advance FINISHING. Every
  // ~100-500 ms (CoordinatorServer's ticker); all decisions use the injected clock.
  void Tick();

  v1::ClusterStatus Status() const;
  // Ends the hold of CoordinatorOptions::hold_start; the job then starts as it would have (every
  // shard and num_workers workers, or the startup grace). Returns whether it was held; releasing
  // a job that is not held does nothing.
  bool Release();
  // The newest model export published as the job runs (model_export::LiveExporter); the status
  // names it.
  void SetLatestExport(const v1::ExportRecord& record);
  // The job's last exports are published (or abandoned): the status says exports_finished.
  void SetExportsFinished();
  // When the shards were told to stop (and so to write their last checkpoints): InfiniteFuture
  // before the job drains.
  absl::Time DrainingSince() const;
  v1::JobState state() const;
  // Waits (real time) until the job is DONE or `timeout` passes; the state then.
  v1::JobState WaitUntilDone(absl::Duration timeout) const;
  JobPhase phase() const;
  // How many times this job's coordinator was restarted (from the progress file).
  int restarts() const;

 private:
  struct Worker {
    int32_t id = 0;
    std::string name;
    v1::Role role = v1::ROLE_WORKER;
    std::shared_ptr<WorkerLink> link;  // null once gone
    bool welcomed = false;
    bool member = false;
    int32_t shares = 1;  // the logical workers it stands for (WorkerHello.logical_workers)
    int32_t local_batch = 0;
    int64_t examples = 0;
    int64_t steps = 0;
    float last_loss = 0;
    absl::Time last_heard;
    // Its last step report, or its first request for work since its welcome (it has loaded its
    // data); until then never judged as stalled.
    absl::Time last_step = absl::InfiniteFuture();
    std::deque<double> compute_seconds;  // recent steps, for the median and the timeout
    std::string departed_reason;
    std::string failure;       // its own reason when it failed for good (WorkerStatus.failure)
    rpc::WireBytesTally wire;  // its step reports' bytes, across its restarts
  };
  struct Shard {
    std::shared_ptr<ShardLink> link;  // null while disconnected
    std::string address;
    v1::ShardReport last_report;
    absl::Time last_report_at = absl::InfinitePast();
    bool final_report = false;
    rpc::WireBytesTally wire;  // its reports' bytes, across its restarts
  };
  using WorkerOutbox = std::vector<std::pair<std::shared_ptr<WorkerLink>, v1::CoordinatorToWorker>>;
  using ShardOutbox = std::vector<std::pair<std::shared_ptr<ShardLink>, v1::CoordinatorToShard>>;
  // The progress file's content, taken under mu_ and written after it is released. `sequence`
  // orders snapshots: a write never replaces a newer snapshot with an older one.
  struct ProgressSnapshot {
    uint64_t sequence = 0;
    v1::CoordinatorProgress progress;
  };
  // What a locked section decided, carried out once mu_ is released (see Deliver).
  struct Outbox {
    WorkerOutbox to_workers;
    ShardOutbox to_shards;
    std::vector<std::pair<std::shared_ptr<WorkerLink>, absl::Status>> closes;
    std::optional<ProgressSnapshot> progress;  // the newest snapshot taken, if any
  };

  CoordinatorCore(CoordinatorOptions options, std::vector<v1::ShardPartition> partitions,
                  std::vector<std::string> initial_values, data::LeaseTable leases);

  void MaybeStart(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Welcome(Worker& worker, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The local batch worker `id` would get as one more member (ReshapeMembership's split).
  int32_t ProspectiveShare(int32_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The local batch of the `count` logical workers from `first` on, of `total`, splitting G as
  // job::LocalBatchShare does: one process standing for k of them batches what k would.
  static int32_t SharesOfGlobalBatch(int32_t global_batch, int total, int first, int count);
  // Recomputes membership and local batches (G split across members) and tells everyone.
  void ReshapeMembership(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveWorker(Worker& worker, const std::string& reason, Outbox& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BeginFinishing(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Training and the final evaluation are over: stop everyone and wait (bounded) for the shards'
  // final reports. Only from FINISHING.
  void BeginDraining(const std::string& why, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // DRAINING ends once every connected shard sent its final report, or after a bounded wait.
  void MaybeFinishDraining(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job is done: its result is recorded.
  void MarkDone(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves to `phase` and shows it in the job_state gauge.
  void EnterPhase(JobPhase phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleEval(const v1::EvalReport& report, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::ShardMap MakeShardMap() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllShardsConnected() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int LiveWorkers(v1::Role role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double Elapsed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tick's timers.
  void TimeOutSilentWorkers(absl::Time now, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RUNNING: removes (reason "stalled") each member a connected shard's sync barrier waits for
  // (its last report's barrier_waiting_for) that made no step within StepTimeout.
  void TimeOutStalledWorkers(absl::Time now, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // max(min_silence_timeout, 10 x the worker's median compute time over its recent steps).
  absl::Duration StepTimeout(const Worker& worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeSaveProgress(absl::Time now, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeRequestCheckpoints(absl::Time now, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FINISHING: ask the evaluator for the final evaluation once the workers left (or after
  // finish_timeout), and go on to DRAINING when there is none to wait for or it never came.
  void AdvanceFinishing(absl::Time now, Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a round of mode control (AUTO jobs) and sends the SetMode commands it returns.
  void DecideModes(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RestoreProgress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Snapshots the progress into `out`; Deliver writes it.
  void SaveProgress(Outbox& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds mu_ while a public entry point decides; on leaving scope queues what it decided
  // (Outbox) behind everything decided before it, then releases mu_.
  class Decision;
  // Carries out the queued outboxes in decision order: writes each progress snapshot (first:
  // what was decided is durable before anyone acts on it), then sends the messages and closes
  // sessions. One thread delivers at a time, holding no lock while it calls a link: a thread
  // that finds another delivering leaves its outbox to it (so two decisions made within a
  // microsecond on two threads still reach every peer in order), and a link that calls back
  // into the core from Send or Close only queues more. Never under mu_: the write fsyncs.
  void Deliver() ABSL_LOCKS_EXCLUDED(mu_, delivery_mu_);
  void WriteProgress(const ProgressSnapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_, progress_file_mu_);
  // Counts and describes a hello naming another job.
  absl::Status WrongJob(const std::string& session, const std::string& who,
                        const std::string& job_id) const;

  const CoordinatorOptions options_;
  const std::vector<v1::ShardPartition> partitions_;
  // Per shard, ShardAssignment.initial_values (a model that initialises itself; else empty).
  const std::vector<std::string> initial_values_;
  const int64_t target_examples_;
  const std::string quality_metric_;  // job::QualityMetric: what the kept evaluation is best in
  const absl::Time created_;

  // The decided, not yet delivered outboxes, in decision order (queued under mu_, delivered by
  // Deliver without it). Taken after mu_, never before it.
  absl::Mutex delivery_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::deque<Outbox> undelivered_ ABSL_GUARDED_BY(delivery_mu_);
  bool delivering_ ABSL_GUARDED_BY(delivery_mu_) = false;

  // Serialises progress saves; never held together with mu_.
  absl::Mutex progress_file_mu_;
  uint64_t progress_written_ ABSL_GUARDED_BY(progress_file_mu_) = 0;  // newest sequence written

  mutable absl::Mutex mu_;
  uint64_t progress_sequence_ ABSL_GUARDED_BY(mu_) = 0;  // of the newest snapshot taken
  JobPhase phase_ ABSL_GUARDED_BY(mu_) = JobPhase::kWaiting;
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  absl::Time finishing_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool final_eval_requested_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time draining_since_ ABSL_GUARDED_BY(mu_);  // when DRAINING began
  // When the last missing shard (re)registered: no worker could step while one was away.
  absl::Time shards_complete_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string done_reason_ ABSL_GUARDED_BY(mu_);
  // Why training ended before its target (EvalSpec.early_stop; EarlyStopReason), if it did.
  std::string early_stop_reason_ ABSL_GUARDED_BY(mu_);
  v1::ExportRecord latest_export_ ABSL_GUARDED_BY(mu_);  // SetLatestExport
  bool exports_finished_ ABSL_GUARDED_BY(mu_) = false;   // SetExportsFinished
  data::LeaseTable leases_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, Shard> shards_ ABSL_GUARDED_BY(mu_);
  int32_t next_worker_id_ ABSL_GUARDED_BY(mu_) = 1;
  v1::Membership membership_ ABSL_GUARDED_BY(mu_);
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  ThroughputWindow throughput_ ABSL_GUARDED_BY(mu_);
  // Every evaluation, thinned beyond job::kEvaluationsRemembered (job::ThinEvaluations).
  std::vector<v1::EvalStatus> evals_ ABSL_GUARDED_BY(mu_);
  ModeController modes_ ABSL_GUARDED_BY(mu_);
  absl::Time last_checkpoint_request_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_progress_save_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, int32_t> worker_ids_by_name_ ABSL_GUARDED_BY(mu_);
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  bool expect_evaluator_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = false;  // CoordinatorOptions::hold_start, until Release
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_CORE_H_
