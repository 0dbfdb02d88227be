// The Coordinator gRPC service: worker and shard sessions, GetStatus and Release, wired to a
// CoordinatorCore. One .cc per RPC.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVICE_H_
#define SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVICE_H_

#include <string>

#include "libs/coordinator/coordinator_core.h"
#include "libs/coordinator/coordinator_metrics.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::coordinator {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // `join_token`: every worker and shard hello must carry it (empty = no check). Refusals are
  // logged and counted in `metrics` (not owned; null means CoordinatorMetrics::NoOp()).
  CoordinatorService(CoordinatorCore* core, std::string join_token, CoordinatorMetrics* metrics)
      : core_(core),
        join_token_(std::move(join_token)),
        metrics_(metrics != nullptr ? metrics : CoordinatorMetrics::NoOp()) {}

  // OK, or UNAUTHENTICATED after logging and counting the refusal of a `session` hello.
  // `claimed` is who the hello says it is (a worker's name, a shard's id): the log line names it
  // beside the peer address, so a refusal is traced to a process and not only to an IP that a
  // leftover pod may share with a member (see docs/operations.md, "Pods on a real node").
  absl::Status Authenticate(const std::string& session, const std::string& claimed,
                            const std::string& peer, const std::string& presented_token) const;

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorToWorker>* WorkerSession(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<v1::ShardMessage, v1::CoordinatorToShard>* ShardSession(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::ClusterStatus* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;

 private:
  CoordinatorCore* const core_;
  const std::string join_token_;
  CoordinatorMetrics* const metrics_;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_SERVICE_H_
