// syncopate-shard: holds one partition of the parameters and its optimizer state, aggregates
// the workers' gradients (sync / gba / async) and reports to the coordinator.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/common/clock.h"
#include "libs/metrics/metrics_server.h"
#include "libs/rpc/client_stream.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "libs/shard/shard_core.h"
#include "services/shard/train_service.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "Coordinator address (host:port)");
ABSL_FLAG(int, shard_id, -1, "This shard's id in [0, num_shards) (required)");
ABSL_FLAG(std::string, listen, "0.0.0.0:7071", "gRPC listen address; port 0 picks a free port");
ABSL_FLAG(std::string, advertise_host, "127.0.0.1",
          "Host name workers use to reach this shard (a pod or service name in Kubernetes)");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9101", "Prometheus /metrics address");
ABSL_FLAG(std::string, ready_file, "", "If set, write grpc_port/metrics_port here once serving");

namespace syncopate::shard {
namespace {

using Session = rpc::ClientStream<v1::ShardMessage, v1::CoordinatorToShard>;

// Runs one coordinator session until it ends or shutdown is requested. Returns true when the
// coordinator said the job is done.
bool RunSession(v1::Coordinator::Stub& stub, const std::string& address, TrainService& train,
                ShardMetrics& metrics, bool& reached) {
  absl::Mutex mu;
  bool stopped = false;
  std::string error;
  const int shard_id = absl::GetFlag(FLAGS_shard_id);
  Session session([&stub](grpc::ClientContext* context) { return stub.ShardSession(context); },
                  [&](v1::CoordinatorToShard& message) {
                    switch (message.kind_case()) {
                      case v1::CoordinatorToShard::kAssignment: {
                        reached = true;
                        if (auto existing = train.core()) {
                          // A coordinator restart: keep our state, adopt the membership.
                          existing->SetMembership(message.assignment().membership());
                          break;
                        }
                        absl::StatusOr<std::unique_ptr<ShardCore>> core =
                            ShardCore::Create(message.assignment(), Clock::Real(), &metrics);
                        if (!core.ok()) {
                          LOG(ERROR) << "bad assignment: " << core.status();
                          absl::MutexLock lock(&mu);
                          error = core.status().ToString();
                          break;
                        }
                        LOG(INFO) << "shard " << shard_id << " assigned [" << (*core)->flat_begin()
                                  << ", " << (*core)->flat_end() << ") in mode "
                                  << ModeName(message.assignment().mode());
                        train.SetCore(std::move(*core));
                        break;
                      }
                      case v1::CoordinatorToShard::kMembership:
                        if (auto core = train.core()) core->SetMembership(message.membership());
                        break;
                      case v1::CoordinatorToShard::kSetMode:
                        LOG(INFO) << "mode -> " << ModeName(message.set_mode().mode()) << " ("
                                  << message.set_mode().reason() << ")";
                        if (auto core = train.core()) core->SetMode(message.set_mode().mode());
                        break;
                      case v1::CoordinatorToShard::kStop: {
                        LOG(INFO) << "coordinator says stop: " << message.stop().reason();
                        absl::MutexLock lock(&mu);
                        stopped = true;
                        break;
                      }
                      default:
                        break;
                    }
                  },
                  nullptr);
  v1::ShardMessage hello;
  hello.mutable_hello()->set_shard_id(shard_id);
  hello.mutable_hello()->set_address(address);
  hello.mutable_hello()->set_join_token(train.join_token());
  session.Write(hello);
  // Report twice a second: the coordinator's status view and mode policy feed on it. The last
  // report (after the coordinator's stop) is marked final so the job's status is exact.
  bool final = false;
  while (!final && !session.done()) {
    const bool shutdown = runtime::WaitForShutdown(absl::Milliseconds(500));
    {
      absl::MutexLock lock(&mu);
      if (!error.empty()) break;
      final = stopped;
    }
    if (shutdown && !final) break;
    std::shared_ptr<ShardCore> core = train.core();
    if (core == nullptr) continue;
    const ShardStats stats = core->Stats();
    metrics.SetBarrierWaitingWorkers(static_cast<int64_t>(stats.barrier_waiting_for.size()));
    v1::ShardMessage report;
    v1::ShardReport* r = report.mutable_report();
    r->set_final(final);
    r->set_version(stats.version);
    r->set_mode(stats.mode);
    r->set_updates(stats.updates);
    for (int32_t w : stats.barrier_waiting_for) r->add_barrier_waiting_for(w);
    r->set_gradients_applied(stats.applied);
    r->set_gradients_decayed(stats.decayed);
    r->set_gradients_dropped(stats.dropped);
    r->set_gradients_rejected(stats.rejected);
    session.Write(report);
  }
  if (final) {
    session.WritesDone();
    session.WaitForEnd(absl::Seconds(2));
  }
  absl::MutexLock lock(&mu);
  if (!error.empty()) runtime::Die(error, 1);
  if (session.done() && session.status().error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    // A wrong join token is a configuration error: retrying cannot fix it.
    runtime::Die("the coordinator refused this shard: " + session.status().error_message(), 1);
  }
  if (session.done() && !stopped) {
    LOG(WARNING) << "coordinator session ended: " << session.status().error_message();
  }
  return stopped;
}

int Main() {
  const int shard_id = absl::GetFlag(FLAGS_shard_id);
  if (shard_id < 0) runtime::Die("--shard_id is required and must be >= 0");
  absl::StatusOr<rpc::SecurityConfig> security = rpc::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  rpc::InstallTransportSecurity(security->transport);
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen));
  if (!metrics_server.ok()) runtime::Die(std::string(metrics_server.status().message()), 1);
  ShardMetrics metrics((*metrics_server)->registry(), shard_id);
  TrainService train(&metrics, security->join_token);
  absl::StatusOr<rpc::StartedServer> server =
      rpc::StartServer(absl::GetFlag(FLAGS_listen), {&train});
  if (!server.ok()) runtime::Die(std::string(server.status().message()), 1);
  const std::string address = absl::StrCat(absl::GetFlag(FLAGS_advertise_host), ":", server->port);
  LOG(INFO) << "shard " << shard_id << " serving on port " << server->port << ", metrics on "
            << (*metrics_server)->port() << (security->transport.tls() ? ", mTLS" : ", plaintext")
            << (security->join_token.empty() ? "" : ", join token required");
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written =
        runtime::WriteKeyValueFile(absl::GetFlag(FLAGS_ready_file),
                                   {{"grpc_port", std::to_string(server->port)},
                                    {"metrics_port", std::to_string((*metrics_server)->port())}});
    if (!written.ok()) runtime::Die(std::string(written.message()), 1);
  }

  auto stub = v1::Coordinator::NewStub(rpc::CreateChannel(absl::GetFlag(FLAGS_coordinator)));
  rpc::Backoff backoff;
  while (!runtime::ShutdownRequested()) {
    bool reached = false;
    if (RunSession(*stub, address, train, metrics, reached)) break;
    if (reached) backoff.Reset();
    runtime::WaitForShutdown(backoff.Next());
  }
  server->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
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
