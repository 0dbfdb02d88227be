// CPU contention in virtual time: jobs of CPU work sharing a machine's cores by egalitarian
// processor sharing. While n jobs run on c cores, each progresses at min(1, c / n) of full speed:
// a job alone (or one of at most c) runs at full speed, and four equal jobs started together on
// two cores all finish at twice their solo time. This is the long-run share a fair scheduler
// (Linux CFS, equal weights) gives runnable threads; SimSpec.cpu says which simulated work runs
// on the shared cores (docs/simulation.md, "CPU contention").
//
// Exact method: every running job receives the same service, so one counter S — the work each
// running job has received, growing at rate(n) — orders all completions. A job of w seconds
// started when S read S0 completes when S reaches S0 + w (its tag). Nothing is recomputed per
// job when n changes: the next completion is the smallest tag, and each change re-schedules one
// event for it (older events carry a stale generation and do nothing). Ties complete in the order
// the jobs started. Everything is a fixed sequence of double operations: bit for bit reproducible.
//
// Thread-safety: NOT thread-safe (thread-compatible); it lives on its EventQueue's thread.
#ifndef SYNCOPATE_LIBS_SIM_PROCESSOR_SHARING_H_
#define SYNCOPATE_LIBS_SIM_PROCESSOR_SHARING_H_

#include <cstdint>
#include <deque>
#include <map>
#include <utility>

#include "absl/time/time.h"
#include "libs/sim/event_queue.h"

namespace syncopate::sim {

class ProcessorSharing {
 public:
  using JobId = uint64_t;

  // `queue` must outlive this object; `cores` > 0 (the caller validates it).
  ProcessorSharing(EventQueue* queue, double cores) : queue_(queue), cores_(cores) {}
  ProcessorSharing(const ProcessorSharing&) = delete;
  ProcessorSharing& operator=(const ProcessorSharing&) = delete;

  // Starts `work_seconds` (>= 0; negative counts as 0) of CPU work now; `done` runs in the event
  // at which the work is complete.
  JobId Start(double work_seconds, EventQueue::Action done);
  // Drops an unfinished job (its `done` never runs) and speeds up the others; an id that is
  // unknown or already finished is ignored.
  void Cancel(JobId id);

  // Jobs running now.
  int running() const { return static_cast<int>(jobs_.size()); }
  // The speed of each running job now: min(1, cores / running).
  double Rate() const;

 private:
  // Brings the service counter up to the queue's now.
  void Advance();
  // Schedules the event of the next completion (and retires the one scheduled before).
  void ScheduleNext();
  void Complete(uint64_t generation);

  EventQueue* const queue_;
  const double cores_;
  double served_ = 0;  // S: seconds of work each running job has received
  absl::Duration updated_at_ = absl::ZeroDuration();
  uint64_t generation_ = 0;
  JobId next_id_ = 0;
  // Running jobs by (tag, id): the first one completes next; ids break ties in start order.
  std::map<std::pair<double, JobId>, EventQueue::Action> jobs_;
  std::map<JobId, double> tags_;  // for Cancel
};

// One thread of a process on the shared cores: its pieces of work run one at a time, in the
// order they were given, each on the ProcessorSharing while it runs. A worker's trainer loop and
// a shard's lock serialise their work this way.
//
// Thread-safety: NOT thread-safe, as ProcessorSharing.
class CpuThread {
 public:
  // `cpu` must outlive this object, which must not move while work is queued (callbacks hold it).
  explicit CpuThread(ProcessorSharing* cpu) : cpu_(cpu) {}
  CpuThread(const CpuThread&) = delete;
  CpuThread& operator=(const CpuThread&) = delete;

  // Queues `work_seconds` of CPU work; `done` runs when it is complete.
  void Run(double work_seconds, EventQueue::Action done);
  // Drops the queued work and cancels the running piece (a process that dies).
  void Stop();

 private:
  void Next();

  struct Work {
    double seconds = 0;
    EventQueue::Action done;
  };
  ProcessorSharing* const cpu_;
  std::deque<Work> queued_;
  bool running_ = false;
  ProcessorSharing::JobId job_ = 0;
};

}  // namespace syncopate::sim

#endif  // SYNCOPATE_LIBS_SIM_PROCESSOR_SHARING_H_
