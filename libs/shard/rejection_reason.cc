#include "libs/shard/rejection_reason.h"

namespace syncopate::shard {

absl::string_view RejectionReasonName(RejectionReason reason) {
  switch (reason) {
    case RejectionReason::kWrongShape:
      return "wrong_shape";
    case RejectionReason::kNonFinite:
      return "non_finite";
    case RejectionReason::kBadSamples:
      return "bad_samples";
    case RejectionReason::kNotMember:
      return "not_member";
    case RejectionReason::kFutureToken:
      return "future_token";
    case RejectionReason::kDuplicate:
      return "duplicate";
    case RejectionReason::kOversize:
      return "oversize";
    case RejectionReason::kInvalid:
      return "invalid";
    case RejectionReason::kNoHello:
      return "no_hello";
    case RejectionReason::kEmptyMessage:
      return "empty_message";
    case RejectionReason::kUnauthenticated:
      return "unauthenticated";
    case RejectionReason::kWrongJob:
      return "wrong_job";
    case RejectionReason::kWrongShard:
      return "wrong_shard";
    case RejectionReason::kDuplicateKey:
      return "duplicate_key";
    case RejectionReason::kMalformed:
      return "malformed";
    case RejectionReason::kWireVersion:
      return "wire_version";
    case RejectionReason::kBadSegment:
      return "bad_segment";
  }
  return "invalid";
}

RejectionReason AggregatorRejection(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kFailedPrecondition:
      return RejectionReason::kNotMember;
    case absl::StatusCode::kOutOfRange:
      return RejectionReason::kFutureToken;
    case absl::StatusCode::kAlreadyExists:
      return RejectionReason::kDuplicate;
    default:
      return RejectionReason::kInvalid;
  }
}

}  // namespace syncopate::shard
