// syncopate-shard: holds one partition of the parameters and its optimizer state, aggregates
// the workers' gradients (sync / gba / async) and reports to the coordinator.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/isa/isa.h"
#include "libs/metrics/metrics_server.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "libs/shard/shard_core.h"
#include "libs/shard/shard_server.h"
#include "services/common/security_flags.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "Coordinator address (host:port)");
ABSL_FLAG(int, shard_id, -1, "This shard's id in [0, num_shards) (required)");
ABSL_FLAG(std::string, listen, "0.0.0.0:7071", "gRPC listen address; port 0 picks a free port");
ABSL_FLAG(std::string, advertise_host, "127.0.0.1",
          "Host name workers use to reach this shard (a pod or service name in Kubernetes)");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9101", "Prometheus /metrics address");
ABSL_FLAG(std::string, ready_file, "", "If set, write grpc_port/metrics_port here once serving");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Write checkpoints here (periodically and at the end); after a crash, restore the "
          "newest valid one from here. Empty: no checkpoints");
ABSL_FLAG(int64_t, max_push_bytes, syncopate::shard::kMaxPushBytes,
          "Reject a push whose message is larger than this (RESOURCE_EXHAUSTED, counted as "
          "reason \"oversize\"); at most half the transport limit of 64 MiB");
ABSL_FLAG(bool, shared_memory, true,
          "Offer workers on this host (same kernel and IPC namespace) the co-located data plane: "
          "their dense payloads through a shared-memory segment instead of the gRPC stream "
          "(docs/decisions/0022-co-located-data-plane.md)");
ABSL_FLAG(std::string, restore_dir, "",
          "When --checkpoint_dir has no checkpoint of this job: restore from this directory "
          "(e.g. an earlier run's; any number of shards)");

namespace syncopate::shard {
namespace {

// Half the transport limit leaves room for framing and keeps the application check the one that
// fires (and counts) for any push a worker could plausibly send.
constexpr int64_t kMaxPushBytesCeiling = rpc::kMaxMessageBytes / 2;
static_assert(kMaxPushBytes <= kMaxPushBytesCeiling);

int Main() {
  const int shard_id = absl::GetFlag(FLAGS_shard_id);
  if (shard_id < 0) runtime::Die("--shard_id is required and must be >= 0");
  const int64_t max_push_bytes = absl::GetFlag(FLAGS_max_push_bytes);
  if (max_push_bytes <= 0 || max_push_bytes > kMaxPushBytesCeiling) {
    runtime::Die(absl::StrCat("--max_push_bytes must be in [1, ", kMaxPushBytesCeiling, "]"));
  }
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen));
  if (!metrics_server.ok()) runtime::Die(std::string(metrics_server.status().message()), 1);
  ShardMetrics metrics((*metrics_server)->registry(), shard_id);
  ShardServerOptions options;
  options.shard_id = shard_id;
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.restore_dir = absl::GetFlag(FLAGS_restore_dir);
  options.max_push_bytes = max_push_bytes;
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.join_token = security->join_token;
  options.security = security->transport;
  options.metrics = &metrics;
  absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(std::move(options));
  if (!server.ok()) runtime::Die(std::string(server.status().message()), 1);
  LOG(INFO) << "shard " << shard_id << " serving on port " << (*server)->port() << ", metrics on "
            << (*metrics_server)->port() << (security->transport.tls() ? ", mTLS" : ", plaintext")
            << (security->join_token.empty() ? "" : ", join token required") << "; optimizer "
            << isa::IsaDescription(isa::ActiveIsaLevel());
  if (security->join_token.empty()) {
    LOG(WARNING) << "no join token (--join_token_file): anyone who can reach port "
                 << (*server)->port() << " can pull and push this shard's parameters";
  }
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written =
        runtime::WriteKeyValueFile(absl::GetFlag(FLAGS_ready_file),
                                   {{"grpc_port", std::to_string((*server)->port())},
                                    {"metrics_port", std::to_string((*metrics_server)->port())}});
    if (!written.ok()) runtime::Die(std::string(written.message()), 1);
  }

  // Serve until the job is done, a refusal that retrying cannot fix, or SIGTERM.
  ShardServer::State state = ShardServer::State::kRunning;
  while (state == ShardServer::State::kRunning && !runtime::WaitForShutdown(absl::ZeroDuration())) {
    state = (*server)->Wait(absl::Milliseconds(200));
  }
  if (state == ShardServer::State::kRefused) {
    runtime::Die((*server)->refusal(), runtime::kExitRefused);
  }
  if (state == ShardServer::State::kSuperseded) {
    runtime::Die((*server)->refusal(), runtime::kExitSuperseded);
  }
  (*server)->Shutdown();
  if (state == ShardServer::State::kRunning) {
    // Stopped before the job ended: a drain, a lost node, a helm uninstall mid-job. Not 0, which
    // a shard's Job would count as its completion (runtime::kExitInterrupted).
    LOG(INFO) << "shard " << shard_id << " stopped before the job ended (exit "
              << runtime::kExitInterrupted << ")";
    return runtime::kExitInterrupted;
  }
  LOG(INFO) << "shard " << shard_id << " stopped";
  return 0;
}

}  // namespace
}  // namespace syncopate::shard

int main(int argc, char** argv) {
  syncopate::runtime::InitProcess(argc, argv,
                                  "syncopate-shard --shard_id=N --coordinator=HOST:PORT [flags]\n"
                                  "Holds a partition of the parameters and aggregates gradients.");
  return syncopate::shard::Main();
}
