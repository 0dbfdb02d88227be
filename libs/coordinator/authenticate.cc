// The join-token check shared by the worker and shard sessions.
#include "glog/logging.h"
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/security.h"

namespace syncopate::coordinator {

absl::Status CoordinatorService::Authenticate(const std::string& session, const std::string& peer,
                                              const std::string& presented_token) const {
  absl::Status status = rpc::CheckJoinToken(join_token_, presented_token);
  if (status.ok()) return status;
  LOG(WARNING) << "refused " << session << " session from " << peer << ": " << status.message();
  metrics_->CountRejection(session, "unauthenticated");
  return status;
}

}  // namespace syncopate::coordinator
