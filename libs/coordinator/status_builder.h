// The parts of the coordinator's ClusterStatus that are derived rather than copied from its
// state: the straggler columns of the worker rows, a shard row from its partition and latest
// report, an evaluation record from a report, and the trailing-window throughput. The
// coordinator assembles the status from these under its lock (CoordinatorCore::Status).
// Thread-safety: free functions are pure; ThroughputWindow is thread-compatible.
#ifndef SYNCOPATE_LIBS_COORDINATOR_STATUS_BUILDER_H_
#define SYNCOPATE_LIBS_COORDINATOR_STATUS_BUILDER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "libs/straggler/straggler_detector.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::coordinator {

// Fills the straggler columns (communication median; slowdown, robust z and the flag once the
// worker has enough samples) of every worker row the assessment judges. Rows of workers it does
// not know keep zeros.
void ApplyAssessment(const Assessment& assessment, v1::ClusterStatus& status);

// A shard row: its partition, whether its session is up, and what its latest report said
// (`report` null: it never registered).
v1::ShardStatus ShardRow(const v1::ShardPartition& partition, const std::string& address,
                         bool connected, const v1::ShardReport* report);

// The record of an evaluation. An evaluation point's carries the examples applied at the point
// and the job time it was made (`elapsed_seconds` less its age); a time-based one is stamped on
// arrival (it measured parameters pulled a moment ago) with the job's `examples` and
// `elapsed_seconds`; the final one carries the moment the coordinator asked for it.
v1::EvalStatus EvalStatusOf(const v1::EvalReport& report, int64_t examples, double elapsed_seconds);

// Examples per second over a trailing window: long enough to smooth sync steps, short enough to
// show a straggler's effect within a progress line or two.
class ThroughputWindow {
 public:
  static constexpr absl::Duration kWindow = absl::Seconds(5);

  // The cluster had counted `total_examples` at `now` (non-decreasing in both).
  void Add(absl::Time now, int64_t total_examples);
  // Examples per second between the oldest and newest sample in the window; 0 with fewer than
  // two samples or no time between them.
  double Rate() const;

 private:
  std::deque<std::pair<absl::Time, int64_t>> samples_;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_STATUS_BUILDER_H_
