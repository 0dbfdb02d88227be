// Transport security and the join token: what a Syncopate process proves about itself and what
// it demands of its peers (docs/design.md §8 "Security").
//
// mTLS is optional and all-or-nothing per process: with --tls_cert, --tls_key and --tls_ca every
// server requires a client certificate signed by the CA, and every channel presents the process's
// certificate and verifies the server's against the same CA. A peer without a valid certificate
// fails the TLS handshake (the client sees UNAVAILABLE; gRPC logs the failure on the server).
//
// The join token is a shared secret carried in every session's hello (WorkerHello, ShardHello,
// TrainHello). A server with a token refuses a hello whose token differs with UNAUTHENTICATED.
// An empty expected token turns the check off.
//
// No process-global state: every server and client takes its TransportSecurity explicitly.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_RPC_SECURITY_H_
#define SYNCOPATE_LIBS_RPC_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace syncopate::rpc {

// File paths, as given on the command line.
struct TlsOptions {
  std::string cert_file;  // PEM certificate chain of this process
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA bundle that signs every peer
  // Name expected in the servers' certificates instead of the dialled host (one certificate for
  // every service, e.g. "syncopate"); empty = the host part of each address.
  std::string server_name;
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

// Loaded PEM material. An empty ca_pem means plaintext. A client may carry only ca_pem (it then
// verifies the server but presents no certificate, which a Syncopate server refuses).
struct TransportSecurity {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  std::string server_name;
  bool tls() const { return !ca_pem.empty(); }
};

// Reads the three files. INVALID_ARGUMENT unless all three paths are given (or none), or when a
// file is missing, empty or not PEM.
absl::StatusOr<TransportSecurity> LoadTransportSecurity(const TlsOptions& options);

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TransportSecurity& security);
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TransportSecurity& security);

// OK when the check is off (`expected` empty) or `presented` equals `expected`; otherwise
// UNAUTHENTICATED ("missing join token" / "wrong join token"). The comparison takes the same time
// wherever the first difference is (its duration depends only on the expected token's length).
absl::Status CheckJoinToken(absl::string_view expected, absl::string_view presented);

// A fresh join token: 32 bytes from the kernel's CSPRNG (getrandom), hex-encoded (64 characters).
// UNAVAILABLE if the kernel cannot supply them.
absl::StatusOr<std::string> GenerateJoinToken();

// What a process is asked for (the binaries' --tls_cert, --tls_key, --tls_ca, --tls_server_name,
// --join_token, --join_token_file: services/common/security_flags.h).
struct SecuritySettings {
  TlsOptions tls;
  std::string join_token;       // the token itself (discouraged: visible in argv)
  std::string join_token_file;  // or a file holding it
};
// What it amounts to, loaded.
struct SecurityConfig {
  TlsOptions tls;
  TransportSecurity transport;
  std::string join_token;  // empty = no token
};
// Loads the certificates and the token (a token file's trailing newline is dropped).
// INVALID_ARGUMENT with one clear line (naming the flag) on a bad combination or an unreadable
// file.
absl::StatusOr<SecurityConfig> LoadSecurity(const SecuritySettings& settings);

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_SECURITY_H_
