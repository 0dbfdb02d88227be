// Coordinator.Release: lets a job held at its start (--hold_start) begin (`syncopate release`).
// It changes the job, so unlike GetStatus it needs the join token.
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::coordinator {

grpc::ServerUnaryReactor* CoordinatorService::Release(grpc::CallbackServerContext* context,
                                                      const v1::ReleaseRequest* request,
                                                      v1::ReleaseResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth =
          Authenticate("release", "syncopate release", context->peer(), request->join_token());
      !auth.ok()) {
    reactor->Finish(rpc::ToGrpcStatus(auth));
    return reactor;
  }
  response->set_was_held(core_->Release());
  response->set_state(core_->state());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace syncopate::coordinator
