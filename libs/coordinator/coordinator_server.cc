#include "libs/coordinator/coordinator_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::coordinator {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    CoordinatorServerOptions options) {
  auto server = std::unique_ptr<CoordinatorServer>(new CoordinatorServer());
  CoordinatorMetrics* metrics = options.core.metrics;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> core =
      CoordinatorCore::Create(std::move(options.core));
  if (!core.ok()) return core.status();
  server->core_ = *std::move(core);
  server->service_ = std::make_unique<CoordinatorService>(server->core_.get(),
                                                          std::move(options.join_token), metrics);
  absl::StatusOr<rpc::StartedServer> started =
      rpc::StartServer(options.listen, {server->service_.get()}, options.security);
  if (!started.ok()) return started.status();
  server->server_ = std::move(started->server);
  server->port_ = started->port;
  if (options.tick_interval > absl::ZeroDuration()) {
    CoordinatorServer* raw = server.get();
    const absl::Duration interval = options.tick_interval;
    server->ticker_ = std::thread([raw, interval] {
      while (!raw->stop_ticking_.WaitForNotificationWithTimeout(interval)) raw->core_->Tick();
    });
  }
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

std::string CoordinatorServer::local_address() const { return absl::StrCat("127.0.0.1:", port_); }

void CoordinatorServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  stop_ticking_.Notify();
  if (ticker_.joinable()) ticker_.join();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace syncopate::coordinator
