// The CoordinatorChannel of a real worker (or evaluator): hello, then the welcome; commands
// (leases, batch changes, evaluate, stop) queue up for the training loop; a heartbeat every
// second, from the hello on (while waiting for the welcome and while the role loads its data),
// lets the coordinator tell a busy worker from a dead one.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_WORKER_COORDINATOR_SESSION_H_
#define SYNCOPATE_LIBS_WORKER_COORDINATOR_SESSION_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "libs/rpc/client_stream.h"
#include "libs/rpc/security.h"
#include "libs/worker/coordinator_channel.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::worker {

class CoordinatorSession final : public CoordinatorChannel {
 public:
  // Connects (with `security`: mTLS when it holds certificates, plaintext by default), says
  // hello and waits (up to `timeout`) for the welcome. UNAVAILABLE when the coordinator cannot
  // be reached; the coordinator's own error when it refuses the hello. The welcome may wait for
  // the job to start (every shard registered), so the wait also ends, CANCELLED, within
  // kAbortPoll of `abort` returning true (a SIGTERM: the process must not outlive its grace).
  static absl::StatusOr<std::unique_ptr<CoordinatorSession>> Open(
      const std::string& address, const v1::WorkerHello& hello, absl::Duration timeout,
      const rpc::TransportSecurity& security = {}, std::function<bool()> abort = nullptr);
  static constexpr absl::Duration kAbortPoll = absl::Milliseconds(100);
  ~CoordinatorSession() override;

  const v1::Welcome& welcome() const override { return welcome_; }
  bool stop_requested() const override { return stop_requested_.load(); }
  bool job_ended() const override { return stop_received_.load(); }
  bool Send(const v1::WorkerMessage& message) override;
  absl::StatusOr<std::optional<v1::CoordinatorToWorker>> NextCommand(
      absl::Duration timeout) override;

 private:
  CoordinatorSession() = default;
  void OnMessage(v1::CoordinatorToWorker& message);
  void OnEnd(const grpc::Status& status);
  void HeartbeatLoop();

  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::unique_ptr<rpc::ClientStream<v1::WorkerMessage, v1::CoordinatorToWorker>> stream_;
  v1::Welcome welcome_;
  absl::Notification stop_heartbeat_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> stop_received_{false};
  std::thread heartbeat_;

  absl::Mutex mu_;
  std::deque<v1::CoordinatorToWorker> commands_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::Welcome> pending_welcome_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_COORDINATOR_SESSION_H_
