// The coordinator's lifecycle of a job, one phase at a time:
//
//   WAITING   shards and workers register; nothing is handed out
//   RUNNING   membership fixed, workers welcomed, leases handed out, steps counted
//   FINISHING the target is reached: workers are stopped, the final evaluation is awaited
//   DRAINING  training and evaluation are over, everyone was told to stop; the shards' final
//             reports are awaited (bounded), so the job's last status is exact
//   DONE      the result is recorded; nothing changes any more
//
// The wire (ClusterStatus.state, the job_state gauge, the progress file) has no DRAINING: to the
// outside a draining job is still FINISHING, and DONE means the final status is complete.
// Thread-safety: pure functions, thread-safe.
#ifndef SYNCOPATE_LIBS_COORDINATOR_JOB_PHASE_H_
#define SYNCOPATE_LIBS_COORDINATOR_JOB_PHASE_H_

#include "absl/strings/string_view.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::coordinator {

enum class JobPhase { kWaiting, kRunning, kFinishing, kDraining, kDone };

// The state shown outside the coordinator (kDraining shows as JOB_FINISHING).
v1::JobState ToJobState(JobPhase phase);
// "waiting", "running", "finishing", "draining", "done" (logs).
absl::string_view JobPhaseName(JobPhase phase);
// The phases in which the job has started and not yet ended: the shard map is final, a welcomed
// worker may train (RUNNING) or be told to stop (FINISHING, DRAINING).
bool IsUnderway(JobPhase phase);

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_JOB_PHASE_H_
