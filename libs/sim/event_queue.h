// The simulator's event loop: actions ordered by virtual time, ties broken by the order they were
// scheduled, so a run is a pure function of its inputs (no wall clock, no thread, no hash order).
// VirtualClock lets the real components (shard, mode controller) read the loop's time through
// the same Clock interface they read real time through.
//
// Thread-safety: NOT thread-safe (thread-compatible); one simulation runs on one thread.
// VirtualClock::Now may be called from that thread only.
#ifndef SYNCOPATE_LIBS_SIM_EVENT_QUEUE_H_
#define SYNCOPATE_LIBS_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "libs/common/clock.h"

namespace syncopate::sim {

class EventQueue {
 public:
  using Action = std::function<void()>;

  // Runs `action` at virtual time `at` (never before now(): an earlier time means now). Actions
  // scheduled for the same time run in the order they were scheduled.
  void At(absl::Duration at, Action action);
  void After(absl::Duration delay, Action action) { At(now_ + delay, std::move(action)); }

  // Advances now() to the earliest event and runs it. False when no event is left.
  bool RunNext();

  // Virtual time since the start of the simulation.
  absl::Duration now() const { return now_; }
  // The time of the next event; only when !empty().
  absl::Duration next_time() const { return heap_.front().at; }
  bool empty() const { return heap_.empty(); }
  size_t pending() const { return heap_.size(); }
  // Events run so far.
  int64_t executed() const { return executed_; }

 private:
  struct Event {
    absl::Duration at;
    uint64_t sequence;
    Action action;
  };
  // std::*_heap keep the largest element first: "larger" here means "runs earlier".
  static bool RunsLater(const Event& a, const Event& b) {
    return a.at != b.at ? a.at > b.at : a.sequence > b.sequence;
  }

  std::vector<Event> heap_;
  absl::Duration now_ = absl::ZeroDuration();
  uint64_t next_sequence_ = 0;
  int64_t executed_ = 0;
};

// A Clock that reads an EventQueue's virtual time, offset from a fixed epoch (absl::Time has no
// "zero" the components could mistake for "never").
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(const EventQueue* queue,
                        absl::Time epoch = absl::UnixEpoch() + absl::Hours(1))
      : queue_(queue), epoch_(epoch) {}
  absl::Time Now() override { return epoch_ + queue_->now(); }

 private:
  const EventQueue* const queue_;
  const absl::Time epoch_;
};

}  // namespace syncopate::sim

#endif  // SYNCOPATE_LIBS_SIM_EVENT_QUEUE_H_
