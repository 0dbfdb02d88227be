// The gRPC edge: channels, servers, status conversion and the retry policy, each in one place.
// Thread-safety: free functions are thread-safe; Backoff is thread-compatible.
#ifndef SYNCOPATE_LIBS_RPC_GRPC_UTIL_H_
#define SYNCOPATE_LIBS_RPC_GRPC_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "libs/rpc/security.h"

namespace syncopate::rpc {

// Large enough for any dense shard slice we ship (the MLP is ~1 MiB); anything above is
// refused with RESOURCE_EXHAUSTED by gRPC itself. gRPC's 4 MiB default is too small for big
// models (and a 4 MiB payload already fails because of framing).
inline constexpr int kMaxMessageBytes = 64 << 20;

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A channel to `address` secured by `security` (plaintext when it holds no certificates).
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const TransportSecurity& security);

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (useful with ":0")
};

// Starts a server on `listen_address` ("host:port", port 0 picks a free one) with the services,
// the standard gRPC health service and our message-size limit, secured by `security` (mTLS with
// required client certificates when it holds certificates). SO_REUSEPORT is off, so a busy port
// is an error rather than a silent second server.
absl::StatusOr<StartedServer> StartServer(const std::string& listen_address,
                                          const std::vector<grpc::Service*>& services,
                                          const TransportSecurity& security);

// The retry policy: the one classification of status codes into "retry" and "permanent", used by
// every client that reconnects (workers to the coordinator and the shards, shards to the
// coordinator) and by every process deciding whether a refusal ends it.
//
// Retried, with backoff: the peer is down, restarting or overloaded, or we timed out —
//   UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, ABORTED, RESOURCE_EXHAUSTED;
//   UNKNOWN and INTERNAL (a peer that dies mid-stream can surface as either: an RST_STREAM);
//   ALREADY_EXISTS (our previous session is still registered; the peer drops it when its
//   stream ends).
// Permanent: retrying the same request cannot succeed; it is a configuration error or a bug,
// and the process reports it in one line and exits —
//   INVALID_ARGUMENT, OUT_OF_RANGE (a request the peer can never accept: e.g. a shard id outside
//   the job), FAILED_PRECONDITION (another job, or the job has finished), UNAUTHENTICATED,
//   PERMISSION_DENIED (join token, certificates), NOT_FOUND, UNIMPLEMENTED, DATA_LOSS.
bool IsRetryable(absl::StatusCode code);
bool IsRetryable(const absl::Status& status);
bool IsRetryable(const grpc::Status& status);
// An error retrying cannot fix (not OK and not retryable).
bool IsPermanentError(const absl::Status& status);
bool IsPermanentError(const grpc::Status& status);

// Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And
// Jitter"): spreads reconnects of many workers so a restarted shard is not stampeded.
class Backoff {
 public:
  explicit Backoff(absl::Duration initial = absl::Milliseconds(100),
                   absl::Duration max = absl::Seconds(5), uint64_t seed = std::random_device{}());
  absl::Duration Next();
  void Reset() { attempt_ = 0; }

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_GRPC_UTIL_H_
