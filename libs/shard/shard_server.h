// ShardServer: a running parameter shard — the gRPC server with the ParameterShard service, and
// the shard's side of the coordinator session (ShardNode) on its own thread — behind one handle
// (tensorstore's shape): Start(Options) binds, serves and starts registering with the
// coordinator; the handle owns everything and stops it when destroyed. Every dependency is in
// the Options: clock, metrics (a no-op default), security (plaintext, no token by default),
// checkpoint directories. The process main (services/shard) and in-process tests on localhost:0
// start it the same way.
//
// The session loop reconnects with jittered backoff while the coordinator is unreachable or
// restarting, and ends when the job is done or on a refusal retrying cannot fix
// (rpc::IsPermanentError: a wrong join token, another job, a shard id outside the job).
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_SHARD_SHARD_SERVER_H_
#define SYNCOPATE_LIBS_SHARD_SHARD_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "libs/common/clock.h"
#include "libs/rpc/security.h"
#include "libs/shard/shard_metrics.h"
#include "libs/shard/shard_node.h"
#include "libs/shard/train_service.h"

namespace syncopate::shard {

struct ShardServerOptions {
  int shard_id = 0;
  std::string coordinator;  // "host:port" of the coordinator (required)
  // "host:port"; port 0 picks a free one (port() tells which).
  std::string listen = "127.0.0.1:0";
  // Host name workers dial, registered with the coordinator together with the bound port.
  std::string advertise_host = "127.0.0.1";
  std::string checkpoint_dir;  // write checkpoints here, restore after a crash ("" = off)
  std::string restore_dir;     // else restore from here (another run's; "" = none)
  int64_t max_push_bytes = kMaxPushBytes;
  std::string join_token;           // every TrainHello must carry it; sent in our ShardHello
  rpc::TransportSecurity security;  // the server's and the coordinator channel's (plaintext)
  // Offer workers on this host and IPC namespace the co-located data plane (ADR 0022): their
  // dense payloads through shared memory instead of the stream (--shared_memory).
  bool shared_memory = true;
  Clock* clock = Clock::Real();
  ShardMetrics* metrics = ShardMetrics::NoOp();  // not owned; null means NoOp()
};

class ShardServer {
 public:
  enum class State {
    kRunning,  // registering with, or serving, the coordinator's job
    kJobDone,  // the coordinator said stop and got the final report
    kRefused,  // a refusal retrying cannot fix; refusal() says why
    // Another process of this shard took over the checkpoint directory (this one was frozen or
    // cut off and replaced: checkpoint/shard_claim.h); refusal() says which.
    kSuperseded,
  };

  // UNAVAILABLE when the address cannot be bound; INVALID_ARGUMENT without a coordinator.
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(ShardServerOptions options);
  ~ShardServer();
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  int port() const { return port_; }
  // The address registered with the coordinator (advertise_host:port).
  const std::string& address() const { return address_; }
  // The shard's state machine, once the coordinator assigned a partition (null before).
  std::shared_ptr<ShardCore> core() const { return train_->core(); }

  // Waits up to `timeout` for the session loop to end; returns the state then.
  State Wait(absl::Duration timeout);
  // Why the coordinator refused this shard (after kRefused), or who superseded it (after
  // kSuperseded), in one line.
  std::string refusal() const;

  // Ends the session loop and stops serving (open Train streams end within `grace`).
  // Idempotent; the destructor calls it.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  ShardServer() = default;
  void SessionLoop();

  ShardServerOptions options_;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<TrainService> train_;
  std::unique_ptr<ShardNode> node_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::thread session_thread_;
  absl::Notification stop_;
  absl::Notification ended_;
  bool shut_down_ = false;  // only touched by Shutdown's caller

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kRunning;
  std::string refusal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_SHARD_SERVER_H_
