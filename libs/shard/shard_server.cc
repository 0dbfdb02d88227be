#include "libs/shard/shard_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::shard {

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(ShardServerOptions options) {
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError("a shard server needs the coordinator's address");
  }
  if (options.metrics == nullptr) options.metrics = ShardMetrics::NoOp();
  auto server = std::unique_ptr<ShardServer>(new ShardServer());
  server->options_ = std::move(options);
  const ShardServerOptions& o = server->options_;
  server->train_ = std::make_unique<TrainService>(o.metrics, o.join_token, o.shared_memory);
  absl::StatusOr<rpc::StartedServer> started =
      rpc::StartServer(o.listen, {server->train_.get()}, o.security);
  if (!started.ok()) return started.status();
  server->server_ = std::move(started->server);
  server->port_ = started->port;
  server->address_ = absl::StrCat(o.advertise_host, ":", server->port_);
  server->node_ = std::make_unique<ShardNode>(ShardNodeOptions{.shard_id = o.shard_id,
                                                               .address = server->address_,
                                                               .checkpoint_dir = o.checkpoint_dir,
                                                               .restore_dir = o.restore_dir,
                                                               .max_push_bytes = o.max_push_bytes,
                                                               .clock = o.clock},
                                              *server->train_, *o.metrics);
  server->stub_ = v1::Coordinator::NewStub(rpc::CreateChannel(o.coordinator, o.security));
  ShardServer* self = server.get();
  server->session_thread_ = std::thread([self] { self->SessionLoop(); });
  return server;
}

ShardServer::~ShardServer() { Shutdown(); }

void ShardServer::SessionLoop() {
  rpc::Backoff backoff;
  State end = State::kRunning;
  while (!stop_.HasBeenNotified()) {
    bool reached = false;
    const ShardNode::SessionEnd session = node_->RunSession(*stub_, reached);
    if (session == ShardNode::SessionEnd::kJobDone) {
      end = State::kJobDone;
      break;
    }
    if (session == ShardNode::SessionEnd::kFatal || session == ShardNode::SessionEnd::kSuperseded) {
      absl::MutexLock lock(&mu_);
      refusal_ = node_->fatal_error();
      end = session == ShardNode::SessionEnd::kFatal ? State::kRefused : State::kSuperseded;
      break;
    }
    if (reached) backoff.Reset();
    stop_.WaitForNotificationWithTimeout(backoff.Next());
  }
  {
    absl::MutexLock lock(&mu_);
    state_ = end;
  }
  ended_.Notify();
}

ShardServer::State ShardServer::Wait(absl::Duration timeout) {
  ended_.WaitForNotificationWithTimeout(timeout);
  absl::MutexLock lock(&mu_);
  return state_;
}

std::string ShardServer::refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

void ShardServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  stop_.Notify();
  if (node_ != nullptr) node_->RequestStop();
  if (session_thread_.joinable()) session_thread_.join();
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
}

}  // namespace syncopate::shard
