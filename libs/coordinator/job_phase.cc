#include "libs/coordinator/job_phase.h"

namespace syncopate::coordinator {

v1::JobState ToJobState(JobPhase phase) {
  switch (phase) {
    case JobPhase::kWaiting:
      return v1::JOB_WAITING;
    case JobPhase::kRunning:
      return v1::JOB_RUNNING;
    case JobPhase::kFinishing:
    case JobPhase::kDraining:
      return v1::JOB_FINISHING;
    case JobPhase::kDone:
      return v1::JOB_DONE;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::string_view JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kWaiting:
      return "waiting";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kFinishing:
      return "finishing";
    case JobPhase::kDraining:
      return "draining";
    case JobPhase::kDone:
      return "done";
  }
  return "unknown";
}

bool IsUnderway(JobPhase phase) {
  return phase == JobPhase::kRunning || phase == JobPhase::kFinishing ||
         phase == JobPhase::kDraining;
}

}  // namespace syncopate::coordinator
