// CoordinatorServer: a running coordinator — the gRPC server, the CoordinatorCore and the
// Coordinator service — behind one handle (tensorstore's ocdbt cooperator shape): Start(Options)
// binds, builds and serves; the handle owns everything and stops it when destroyed. Every
// dependency is in the Options: the clock, the progress journal, the metrics (a no-op default)
// and the security (plaintext and no join token unless given). The process main
// (services/coordinator) and in-process tests on localhost:0 start it the same way.
//
// The server runs the core's periodic work (CoordinatorCore::Tick) on its own thread every
// Options.tick_interval, like the shard's session thread; a test on a FakeClock sets it to 0 and
// ticks when it advances the clock. Wait() blocks until the job is done.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVER_H_
#define SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/security.h"

namespace syncopate::coordinator {

struct CoordinatorServerOptions {
  // "host:port"; port 0 picks a free one (port() tells which).
  std::string listen = "127.0.0.1:0";
  // The job, the training set size, the clock, the journal, the metrics and the timeouts.
  CoordinatorOptions core;
  // Every worker and shard hello must carry it (empty = no check).
  std::string join_token;
  // mTLS when it holds certificates; plaintext by default.
  rpc::TransportSecurity security;
  // How often the server's thread calls core().Tick(); 0: never (the owner ticks).
  absl::Duration tick_interval = kTickInterval;
};

class CoordinatorServer {
 public:
  // INVALID_ARGUMENT for a job the core refuses; UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(CoordinatorServerOptions options);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>": where a client on this machine dials.
  std::string local_address() const;
  CoordinatorCore& core() { return *core_; }
  // Waits up to `timeout` for the job to be done; the job's state then.
  v1::JobState Wait(absl::Duration timeout) const { return core_->WaitUntilDone(timeout); }

  // Stops ticking and serving: new calls are refused and open sessions end (their clients see
  // UNAVAILABLE) after at most `grace`. Idempotent; the destructor calls it.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  CoordinatorServer() = default;

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  absl::Notification stop_ticking_;
  std::thread ticker_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVER_H_
