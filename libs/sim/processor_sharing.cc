#include "libs/sim/processor_sharing.h"

#include <algorithm>

namespace syncopate::sim {

double ProcessorSharing::Rate() const {
  const double n = static_cast<double>(jobs_.size());
  return n <= cores_ ? 1.0 : cores_ / n;
}

void ProcessorSharing::Advance() {
  const absl::Duration now = queue_->now();
  if (!jobs_.empty()) served_ += absl::ToDoubleSeconds(now - updated_at_) * Rate();
  updated_at_ = now;
}

ProcessorSharing::JobId ProcessorSharing::Start(double work_seconds, EventQueue::Action done) {
  Advance();
  const JobId id = next_id_++;
  const double tag = served_ + std::max(0.0, work_seconds);
  jobs_.emplace(std::make_pair(tag, id), std::move(done));
  tags_.emplace(id, tag);
  ScheduleNext();
  return id;
}

void ProcessorSharing::Cancel(JobId id) {
  auto it = tags_.find(id);
  if (it == tags_.end()) return;
  Advance();
  jobs_.erase(std::make_pair(it->second, id));
  tags_.erase(it);
  ScheduleNext();
}

void ProcessorSharing::ScheduleNext() {
  const uint64_t generation = ++generation_;
  if (jobs_.empty()) return;
  const double remaining = std::max(0.0, jobs_.begin()->first.first - served_);
  queue_->After(absl::Seconds(remaining / Rate()), [this, generation] { Complete(generation); });
}

void ProcessorSharing::Complete(uint64_t generation) {
  if (generation != generation_) return;  // n changed since: a later event took over
  Advance();
  auto head = jobs_.begin();
  // The event's time was rounded to the queue's resolution: the head is done by definition, and
  // jobs with the same tag complete next, at this same time, rather than a rounding error later.
  served_ = std::max(served_, head->first.first);
  EventQueue::Action done = std::move(head->second);
  tags_.erase(head->first.second);
  jobs_.erase(head);
  ScheduleNext();
  done();
}

void CpuThread::Run(double work_seconds, EventQueue::Action done) {
  queued_.push_back({work_seconds, std::move(done)});
  Next();
}

void CpuThread::Stop() {
  queued_.clear();
  if (running_) cpu_->Cancel(job_);
  running_ = false;
}

void CpuThread::Next() {
  if (running_ || queued_.empty()) return;
  Work work = std::move(queued_.front());
  queued_.pop_front();
  running_ = true;
  job_ = cpu_->Start(work.seconds, [this, done = std::move(work.done)] {
    running_ = false;
    done();  // may queue more work: it runs after what was queued before it
    Next();
  });
}

}  // namespace syncopate::sim
