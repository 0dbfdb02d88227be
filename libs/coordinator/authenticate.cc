// The join-token check shared by the worker and shard sessions.
#include "absl/strings/escaping.h"
#include "glog/logging.h"
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/security.h"

namespace syncopate::coordinator {

absl::Status CoordinatorService::Authenticate(const std::string& session,
                                              const std::string& claimed, const std::string& peer,
                                              const std::string& presented_token) const {
  absl::Status status = rpc::CheckJoinToken(join_token_, presented_token);
  if (status.ok()) return status;
  // The claimed name is the peer's own words: escaped and cut short, so a stranger cannot forge
  // log lines or flood the log. The presented token's length (never its bytes) tells a truncated
  // or mangled secret from another release's.
  constexpr size_t kMaxLoggedName = 64;
  LOG(WARNING) << "refused " << session << " session claiming '"
               << absl::CEscape(absl::string_view(claimed).substr(0, kMaxLoggedName)) << "' from "
               << peer << ": " << status.message() << " (" << presented_token.size()
               << "-byte token presented)";
  metrics_->CountRejection(session, "unauthenticated");
  return status;
}

}  // namespace syncopate::coordinator
