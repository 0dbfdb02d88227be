#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::rpc {
namespace {

// Every code, classified: the table in grpc_util.h, checked entry by entry.
TEST(RetryPolicy, EveryCodeIsClassified) {
  const absl::StatusCode retried[] = {
      absl::StatusCode::kUnavailable,       absl::StatusCode::kDeadlineExceeded,
      absl::StatusCode::kCancelled,         absl::StatusCode::kAborted,
      absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnknown,
      absl::StatusCode::kInternal,          absl::StatusCode::kAlreadyExists};
  const absl::StatusCode permanent[] = {
      absl::StatusCode::kInvalidArgument,    absl::StatusCode::kOutOfRange,
      absl::StatusCode::kFailedPrecondition, absl::StatusCode::kUnauthenticated,
      absl::StatusCode::kPermissionDenied,   absl::StatusCode::kNotFound,
      absl::StatusCode::kUnimplemented,      absl::StatusCode::kDataLoss};
  for (absl::StatusCode code : retried) {
    EXPECT_TRUE(IsRetryable(code)) << absl::StatusCodeToString(code);
    EXPECT_TRUE(IsRetryable(grpc::Status(static_cast<grpc::StatusCode>(code), "x")));
    EXPECT_FALSE(IsPermanentError(absl::Status(code, "x")));
  }
  for (absl::StatusCode code : permanent) {
    EXPECT_FALSE(IsRetryable(code)) << absl::StatusCodeToString(code);
    EXPECT_FALSE(IsRetryable(grpc::Status(static_cast<grpc::StatusCode>(code), "x")));
    EXPECT_TRUE(IsPermanentError(absl::Status(code, "x")));
    EXPECT_TRUE(IsPermanentError(grpc::Status(static_cast<grpc::StatusCode>(code), "x")));
  }
  EXPECT_EQ(std::size(retried) + std::size(permanent), 16u) << "every code but OK";
}

TEST(RetryPolicy, OkIsNeitherRetriedNorAnError) {
  EXPECT_FALSE(IsRetryable(absl::OkStatus()));
  EXPECT_FALSE(IsPermanentError(absl::OkStatus()));
  EXPECT_FALSE(IsPermanentError(grpc::Status::OK));
}

}  // namespace
}  // namespace syncopate::rpc
