// The Coordinator gRPC service: worker and shard sessions and GetStatus, wired to a
// CoordinatorCore. One .cc per RPC.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
#define SYNCOPATE_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_

#include "libs/coordinator/coordinator_core.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::coordinator {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  explicit CoordinatorService(CoordinatorCore* core) : core_(core) {}

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorToWorker>* WorkerSession(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<v1::ShardMessage, v1::CoordinatorToShard>* ShardSession(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::ClusterStatus* response) override;

 private:
  CoordinatorCore* const core_;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
