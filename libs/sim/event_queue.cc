#include "libs/sim/event_queue.h"

#include <algorithm>
#include <utility>

namespace syncopate::sim {

void EventQueue::At(absl::Duration at, Action action) {
  heap_.push_back({std::max(at, now_), next_sequence_++, std::move(action)});
  std::push_heap(heap_.begin(), heap_.end(), RunsLater);
}

bool EventQueue::RunNext() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), RunsLater);
  Event event = std::move(heap_.back());
  heap_.pop_back();
  now_ = event.at;
  ++executed_;
  // The action may schedule more events: it runs after the heap is consistent again.
  event.action();
  return true;
}

}  // namespace syncopate::sim
