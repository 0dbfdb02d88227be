#include "libs/rpc/security.h"

#include <sys/random.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace syncopate::rpc {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is empty"));
  }
  return contents.str();
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(flag, path);
  if (pem.ok() && !absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is not PEM"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<TransportSecurity> LoadTransportSecurity(const TlsOptions& options) {
  TransportSecurity security;
  security.server_name = options.server_name;
  if (!options.enabled()) return security;
  if (options.cert_file.empty() || options.key_file.empty() || options.ca_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert, --tls_key and --tls_ca go together");
  }
  absl::StatusOr<std::string> cert = ReadPem("tls_cert", options.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls_key", options.key_file);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPem("tls_ca", options.ca_file);
  if (!ca.ok()) return ca.status();
  security.cert_pem = *std::move(cert);
  security.key_pem = *std::move(key);
  security.ca_pem = *std::move(ca);
  return security;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.ca_pem;
  options.pem_private_key = security.key_pem;
  options.pem_cert_chain = security.cert_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  // Mutual TLS: a client must present a certificate, and it must chain to our CA.
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

absl::Status CheckJoinToken(absl::string_view expected, absl::string_view presented) {
  if (expected.empty()) return absl::OkStatus();
  if (presented.empty()) return absl::UnauthenticatedError("missing join token");
  // Constant time in the position of the first difference: every byte of `expected` is visited
  // and differences are OR-ed together, with no early exit.
  unsigned char difference = expected.size() == presented.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char theirs = i < presented.size() ? presented[i] : 0;
    difference |= static_cast<unsigned char>(expected[i]) ^ theirs;
  }
  if (difference != 0) return absl::UnauthenticatedError("wrong join token");
  return absl::OkStatus();
}

absl::StatusOr<std::string> GenerateJoinToken() {
  // 256 bits: far beyond guessing over the network, and the same strength as the TLS keys.
  unsigned char bytes[32];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t got = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return absl::UnavailableError("getrandom failed: cannot generate a join token");
    filled += static_cast<size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(2 * sizeof(bytes));
  for (unsigned char byte : bytes) {
    token.push_back(kHex[byte >> 4]);
    token.push_back(kHex[byte & 0xf]);
  }
  return token;
}

absl::StatusOr<SecurityConfig> LoadSecurity(const SecuritySettings& settings) {
  SecurityConfig config;
  config.tls = settings.tls;
  absl::StatusOr<TransportSecurity> transport = LoadTransportSecurity(config.tls);
  if (!transport.ok()) return transport.status();
  config.transport = *std::move(transport);
  const std::string& token = settings.join_token;
  const std::string& token_file = settings.join_token_file;
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("--join_token and --join_token_file are exclusive");
  }
  config.join_token = token;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> contents = ReadFile("join_token_file", token_file);
    if (!contents.ok()) return contents.status();
    absl::string_view trimmed = *contents;
    while (absl::ConsumeSuffix(&trimmed, "\n") || absl::ConsumeSuffix(&trimmed, "\r")) {
    }
    if (trimmed.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--join_token_file: ", token_file, " holds no token"));
    }
    config.join_token = std::string(trimmed);
  }
  return config;
}

}  // namespace syncopate::rpc
