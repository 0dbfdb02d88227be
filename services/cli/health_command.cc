// `syncopate health`: a gRPC health-check client for container HEALTHCHECKs.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"
#include "services/common/security_flags.h"

namespace syncopate::cli {

// A container HEALTHCHECK needs a client for grpc.health.v1 and Debian has no grpc_health_probe.
// Exit codes follow the HEALTHCHECK contract: 0 healthy, 1 unhealthy (unreachable or not SERVING).
int RunHealth() {
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  const std::string address = absl::GetFlag(FLAGS_address);
  auto stub = grpc::health::v1::Health::NewStub(rpc::CreateChannel(address, security->transport));
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_health_timeout_seconds))));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status rpc = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!rpc.ok()) runtime::Die(absl::StrCat(address, ": ", rpc.error_message()), 1);
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  printf("%s: %s\n", address.c_str(), status.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace syncopate::cli
