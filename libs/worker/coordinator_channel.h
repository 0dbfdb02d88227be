// CoordinatorChannel: the coordinator as a training or evaluation loop sees it — the welcome,
// commands to take (leases, batch changes, evaluate, stop) and reports to send. The real one is
// CoordinatorSession (a gRPC stream with a heartbeat); tests script one in memory.
// Thread-safety: implementations are thread-safe.
#ifndef SYNCOPATE_LIBS_WORKER_COORDINATOR_CHANNEL_H_
#define SYNCOPATE_LIBS_WORKER_COORDINATOR_CHANNEL_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::worker {

class CoordinatorChannel {
 public:
  virtual ~CoordinatorChannel() = default;

  virtual const v1::Welcome& welcome() const = 0;
  // True once a Stop arrived (even if not yet taken) or the channel ended.
  virtual bool stop_requested() const = 0;
  // True once a Stop arrived: the coordinator ended the job (not merely the channel).
  virtual bool job_ended() const = 0;
  // False once the channel is closed.
  virtual bool Send(const v1::WorkerMessage& message) = 0;
  // The next command, waiting up to `timeout`; nullopt on timeout. UNAVAILABLE once the channel
  // has ended and every queued command was taken.
  virtual absl::StatusOr<std::optional<v1::CoordinatorToWorker>> NextCommand(
      absl::Duration timeout) = 0;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_COORDINATOR_CHANNEL_H_
