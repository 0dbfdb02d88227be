// `syncopate status`: the coordinator's ClusterStatus as tables (libs/report/status_view.h).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/report/status_view.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"
#include "services/common/security_flags.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::cli {

int RunStatus() {
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  auto stub = v1::Coordinator::NewStub(
      rpc::CreateChannel(absl::GetFlag(FLAGS_coordinator), security->transport));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ClusterStatus status;
  grpc::Status rpc = stub->GetStatus(&context, v1::GetStatusRequest(), &status);
  if (!rpc.ok()) {
    runtime::Die(
        absl::StrCat("cannot reach ", absl::GetFlag(FLAGS_coordinator), ": ", rpc.error_message()),
        1);
  }
  fputs(report::StatusText(status).c_str(), stdout);
  return 0;
}

}  // namespace syncopate::cli
