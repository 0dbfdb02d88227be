#include "libs/rpc/security.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace syncopate::rpc {
namespace {

TEST(CheckJoinToken, NoExpectedTokenAdmitsEveryone) {
  EXPECT_TRUE(CheckJoinToken("", "").ok());
  EXPECT_TRUE(CheckJoinToken("", "anything").ok());
}

TEST(CheckJoinToken, OnlyTheExactTokenIsAdmitted) {
  EXPECT_TRUE(CheckJoinToken("s3cret", "s3cret").ok());
  for (const char* wrong : {"s3creT", "s3cre", "s3cret!", "S3CRET", "x"}) {
    absl::Status status = CheckJoinToken("s3cret", wrong);
    EXPECT_TRUE(absl::IsUnauthenticated(status)) << wrong;
  }
  // A presented token that is a prefix padded with NULs must not pass either.
  EXPECT_TRUE(absl::IsUnauthenticated(CheckJoinToken("ab", std::string("ab\0", 3))));
  EXPECT_TRUE(absl::IsUnauthenticated(CheckJoinToken(std::string("ab\0", 3), "ab")));
}

TEST(CheckJoinToken, MissingAndWrongAreTold) {
  EXPECT_EQ(CheckJoinToken("t", "").message(), "missing join token");
  EXPECT_EQ(CheckJoinToken("t", "u").message(), "wrong join token");
}

TlsOptions Files(std::string cert, std::string key, std::string ca) {
  TlsOptions options;
  options.cert_file = std::move(cert);
  options.key_file = std::move(key);
  options.ca_file = std::move(ca);
  return options;
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(GenerateJoinToken, SixtyFourHexCharactersDifferentEachTime) {
  absl::StatusOr<std::string> first = GenerateJoinToken();
  absl::StatusOr<std::string> second = GenerateJoinToken();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos) << *first;
  // Two 256-bit draws collide with probability 2^-256.
  EXPECT_NE(*first, *second);
  // A generated token is accepted by the check it is meant for, and only it.
  EXPECT_TRUE(CheckJoinToken(*first, *first).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(CheckJoinToken(*first, *second)));
}

TEST(LoadTransportSecurity, NoFilesMeansPlaintext) {
  absl::StatusOr<TransportSecurity> security = LoadTransportSecurity({});
  ASSERT_TRUE(security.ok());
  EXPECT_FALSE(security->tls());
}

TEST(LoadTransportSecurity, FilesGoTogether) {
  const std::string pem = WriteTemp("a.pem", "-----BEGIN CERTIFICATE-----\n");
  absl::StatusOr<TransportSecurity> security = LoadTransportSecurity(Files(pem, pem, ""));
  EXPECT_TRUE(absl::IsInvalidArgument(security.status()));
  EXPECT_EQ(security.status().message(), "--tls_cert, --tls_key and --tls_ca go together");
}

TEST(LoadTransportSecurity, RefusesMissingEmptyAndNonPemFiles) {
  const std::string pem = WriteTemp("b.pem", "-----BEGIN CERTIFICATE-----\n");
  const std::string empty = WriteTemp("empty.pem", "");
  const std::string text = WriteTemp("text.pem", "hello");
  EXPECT_TRUE(
      absl::IsInvalidArgument(LoadTransportSecurity(Files(pem, pem, "/nonexistent")).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(LoadTransportSecurity(Files(empty, pem, pem)).status()));
  absl::StatusOr<TransportSecurity> not_pem = LoadTransportSecurity(Files(pem, text, pem));
  EXPECT_TRUE(absl::IsInvalidArgument(not_pem.status()));
  EXPECT_NE(not_pem.status().message().find("--tls_key"), absl::string_view::npos);
  absl::StatusOr<TransportSecurity> ok = LoadTransportSecurity(Files(pem, pem, pem));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->tls());
}

}  // namespace
}  // namespace syncopate::rpc
