// A one-worker cluster in this process for the benchmarks: a coordinator and one ShardServer on
// localhost, a worker session and its ParameterClient connected to the shard, the job started.
// What syncopate-perf-bench's wire ratio and syncopate-torch-bench's step measure against.
// Thread-safety: thread-compatible.
#ifndef SYNCOPATE_BENCH_IN_PROCESS_CLUSTER_H_
#define SYNCOPATE_BENCH_IN_PROCESS_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "libs/common/status_macros.h"
#include "libs/coordinator/coordinator_server.h"
#include "libs/job/model_kind.h"
#include "libs/shard/shard_server.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/parameter_client.h"

namespace syncopate::bench {

struct InProcessCluster {
  std::unique_ptr<coordinator::CoordinatorServer> coordinator;
  std::unique_ptr<shard::ShardServer> shard;
  std::unique_ptr<worker::CoordinatorSession> session;
  std::unique_ptr<worker::ParameterClient> client;

  ~InProcessCluster() {
    client.reset();
    session.reset();
    if (shard != nullptr) shard->Shutdown(absl::Milliseconds(200));
    if (coordinator != nullptr) coordinator->Shutdown(absl::Milliseconds(200));
  }
};

// `job` must have one worker and one shard. The job never ends by itself (no step reports).
// `shared_memory`: the worker takes the shard's co-located plane (ADR 0022), as a worker on the
// shard's host does by default; false: the wire.
inline absl::StatusOr<std::unique_ptr<InProcessCluster>> StartInProcessCluster(
    v1::JobSpec job, job::ModelDescription model, const std::vector<int32_t>& table_dims = {},
    bool shared_memory = false) {
  constexpr char kToken[] = "in-process-bench";
  auto cluster = std::make_unique<InProcessCluster>();
  coordinator::CoordinatorServerOptions coordinator_options;
  coordinator_options.core.job = std::move(job);
  coordinator_options.core.model = std::move(model);
  coordinator_options.join_token = kToken;
  SYNCOPATE_ASSIGN_OR_RETURN(cluster->coordinator,
                             coordinator::CoordinatorServer::Start(std::move(coordinator_options)));
  shard::ShardServerOptions shard_options;
  shard_options.coordinator = cluster->coordinator->local_address();
  shard_options.join_token = kToken;
  SYNCOPATE_ASSIGN_OR_RETURN(cluster->shard, shard::ShardServer::Start(std::move(shard_options)));
  for (int i = 0; i < 1000 && !cluster->coordinator->core().Status().shards(0).connected(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  v1::WorkerHello hello;
  hello.set_name("in-process-bench");
  hello.set_role(v1::ROLE_WORKER);
  hello.set_join_token(kToken);
  SYNCOPATE_ASSIGN_OR_RETURN(cluster->session,
                             worker::CoordinatorSession::Open(cluster->coordinator->local_address(),
                                                              hello, absl::Seconds(30)));
  // The coordinator assigns the shard its partition once the job starts (this join starts it).
  for (int i = 0; i < 3000 && cluster->shard->core() == nullptr; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const v1::Welcome& welcome = cluster->session->welcome();
  // Field by field, not a designated-initializer temporary: GCC 12 at -O3 then warns that the
  // temporary's TransportSecurity strings "may be used uninitialized" (a false positive).
  worker::ParameterClientOptions options;
  options.connection.worker_id = welcome.worker_id();
  options.connection.join_token = kToken;
  options.connection.job_id = welcome.job().job_id();
  options.connection.shared_memory = shared_memory;
  options.table_dims = table_dims;
  cluster->client =
      std::make_unique<worker::ParameterClient>(welcome.shard_map(), std::move(options));
  SYNCOPATE_RETURN_IF_ERROR(cluster->client->Connect(absl::Seconds(30)));
  return cluster;
}

}  // namespace syncopate::bench

#endif  // SYNCOPATE_BENCH_IN_PROCESS_CLUSTER_H_
