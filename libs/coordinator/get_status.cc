// Coordinator.GetStatus: the cluster view for `syncopate status`, the launcher and tests.
#include "libs/coordinator/coordinator_service.h"

namespace syncopate::coordinator {

grpc::ServerUnaryReactor* CoordinatorService::GetStatus(grpc::CallbackServerContext* context,
                                                        const v1::GetStatusRequest* request,
                                                        v1::ClusterStatus* response) {
  *response = core_->Status();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace syncopate::coordinator
