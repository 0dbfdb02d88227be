#include "libs/rpc/grpc_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/health_check_service_interface.h"

namespace syncopate::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const TransportSecurity& security) {
  grpc::ChannelArguments args;
  if (security.tls() && !security.server_name.empty()) {
    args.SetSslTargetNameOverride(security.server_name);
  }
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Keepalive pings detect a silently dead peer (no RST, e.g. a partitioned node) within ~20 s.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(address, ChannelCredentials(security), args);
}

absl::StatusOr<StartedServer> StartServer(const std::string& listen_address,
                                          const std::vector<grpc::Service*>& services,
                                          const TransportSecurity& security) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  StartedServer started;
  builder.AddListeningPort(listen_address, ServerCredentials(security), &started.port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // The server pings its clients too: a client on a lost node (frozen, or cut off without a RST)
  // leaves its streams open for the TCP retransmission timeout (~15 min) otherwise, and the
  // coordinator refuses that shard id's replacement for as long as its old session stands.
  // Detected within ~20 s, like the clients' side (tests/deploy/kube_node_loss_test.sh).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  for (grpc::Service* service : services) builder.RegisterService(service);
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || started.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen_address, " (address in use or invalid)"));
  }
  return started;
}

bool IsRetryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kAlreadyExists:
      return true;
    default:
      return false;
  }
}

bool IsRetryable(const absl::Status& status) { return IsRetryable(status.code()); }

bool IsRetryable(const grpc::Status& status) {
  // grpc::StatusCode and absl::StatusCode share their numbering (both are google.rpc.Code).
  return IsRetryable(static_cast<absl::StatusCode>(status.error_code()));
}

bool IsPermanentError(const absl::Status& status) { return !status.ok() && !IsRetryable(status); }

bool IsPermanentError(const grpc::Status& status) { return !status.ok() && !IsRetryable(status); }

Backoff::Backoff(absl::Duration initial, absl::Duration max, uint64_t seed)
    : initial_(initial), max_(max), rng_(seed) {}

absl::Duration Backoff::Next() {
  const absl::Duration cap = std::min(max_, initial_ * (int64_t{1} << std::min(attempt_, 20)));
  ++attempt_;
  std::uniform_real_distribution<double> jitter(0.0, 1.0);
  return cap * jitter(rng_);
}

}  // namespace syncopate::rpc
