#include "services/common/security_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate of this process; with --tls_key and --tls_ca turns on mTLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle that must have signed every peer's certificate");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name expected in servers' certificates instead of the dialled host (optional)");
ABSL_FLAG(std::string, join_token, "",
          "Shared secret every session's hello must carry (prefer --join_token_file)");
ABSL_FLAG(std::string, join_token_file, "",
          "File holding the join token (e.g. a mounted Kubernetes secret); trailing newline "
          "ignored");

namespace syncopate::services {

rpc::SecuritySettings SecuritySettingsFromFlags() {
  rpc::SecuritySettings settings;
  settings.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  settings.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  settings.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  settings.tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  settings.join_token = absl::GetFlag(FLAGS_join_token);
  settings.join_token_file = absl::GetFlag(FLAGS_join_token_file);
  return settings;
}

absl::StatusOr<rpc::SecurityConfig> SecurityFromFlags() {
  return rpc::LoadSecurity(SecuritySettingsFromFlags());
}

}  // namespace syncopate::services
