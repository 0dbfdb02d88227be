// The security flags every Syncopate binary takes, defined once here (not in libs/rpc: libraries
// take their security as values): --tls_cert, --tls_key, --tls_ca, --tls_server_name,
// --join_token, --join_token_file (see `<binary> --helpfull` and docs/operations.md).
// Thread-safety: call after flags are parsed (runtime::InitProcess).
#ifndef SYNCOPATE_SERVICES_COMMON_SECURITY_FLAGS_H_
#define SYNCOPATE_SERVICES_COMMON_SECURITY_FLAGS_H_

#include "absl/status/statusor.h"
#include "libs/rpc/security.h"

namespace syncopate::services {

// The flags as settings (nothing read yet).
rpc::SecuritySettings SecuritySettingsFromFlags();
// The flags, loaded: rpc::LoadSecurity(SecuritySettingsFromFlags()).
absl::StatusOr<rpc::SecurityConfig> SecurityFromFlags();

}  // namespace syncopate::services

#endif  // SYNCOPATE_SERVICES_COMMON_SECURITY_FLAGS_H_
