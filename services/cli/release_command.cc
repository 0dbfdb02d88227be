// `syncopate release`: lets a job held at its start (syncopate-coordinator --hold_start) begin.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"
#include "services/common/security_flags.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::cli {

int RunRelease() {
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  const std::string coordinator = absl::GetFlag(FLAGS_coordinator);
  auto stub = v1::Coordinator::NewStub(rpc::CreateChannel(coordinator, security->transport));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ReleaseRequest request;
  request.set_join_token(security->join_token);
  v1::ReleaseResponse response;
  grpc::Status rpc = stub->Release(&context, request, &response);
  if (rpc.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    runtime::Die(absl::StrCat(coordinator, " refused the release: ", rpc.error_message(),
                              " (pass the job's --join_token_file)"),
                 runtime::kExitRefused);
  }
  if (!rpc.ok()) {
    runtime::Die(absl::StrCat("cannot reach ", coordinator, ": ", rpc.error_message()), 1);
  }
  printf("%s: %s; job %s\n", coordinator.c_str(), response.was_held() ? "released" : "was not held",
         v1::JobState_Name(response.state()).c_str());
  return 0;
}

}  // namespace syncopate::cli
