// Why a shard refused a push, a pull or a training session: one enum, one name each. The names
// are the `reason` label values of syncopate_shard_rejections_total (docs/metrics.md), so a
// reason cannot be misspelled into a new label.
// Thread-safety: constants and pure functions, thread-safe.
#ifndef SYNCOPATE_LIBS_SHARD_REJECTION_REASON_H_
#define SYNCOPATE_LIBS_SHARD_REJECTION_REASON_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace syncopate::shard {

enum class RejectionReason {
  kWrongShape,       // a gradient or row block of the wrong length; undecodable keys
  kNonFinite,        // NaN or Inf in a gradient
  kBadSamples,       // a sample count <= 0 or above G
  kNotMember,        // the pushing worker is not in the current membership
  kFutureToken,      // a token newer than the shard's version
  kDuplicate,        // a second gradient from the same worker for the same sync version
  kOversize,         // a push above the shard's size limit
  kInvalid,          // any other refusal by the aggregator
  kNoHello,          // a Train stream whose first message is not a hello
  kEmptyMessage,     // a WorkerToShard message with nothing in it
  kUnauthenticated,  // a missing or wrong join token
  kWrongJob,         // a hello naming another job
  kWrongShard,       // an embedding key another shard owns, or a table the job lacks
  kDuplicateKey,     // the same embedding key twice in one table of one push
  kMalformed,        // a Train message that is not a valid encoding (rpc::DecodeWithPayload)
  kWireVersion,      // a hello of another Train wire version (rpc::kTrainWireVersion)
  kBadSegment,       // a push naming shared memory its stream has not, or more than its area
};

// Every reason, in the order above (metrics start each at 0).
inline constexpr RejectionReason kAllRejectionReasons[] = {
    RejectionReason::kWrongShape,   RejectionReason::kNonFinite,       RejectionReason::kBadSamples,
    RejectionReason::kNotMember,    RejectionReason::kFutureToken,     RejectionReason::kDuplicate,
    RejectionReason::kOversize,     RejectionReason::kInvalid,         RejectionReason::kNoHello,
    RejectionReason::kEmptyMessage, RejectionReason::kUnauthenticated, RejectionReason::kWrongJob,
    RejectionReason::kWrongShard,   RejectionReason::kDuplicateKey,    RejectionReason::kMalformed,
    RejectionReason::kWireVersion,  RejectionReason::kBadSegment,
};

// The metric label: "wrong_shape", "non_finite", ...
absl::string_view RejectionReasonName(RejectionReason reason);

// The reason for a push the aggregator refused with `code` (GlobalBatchAggregator::Push):
// FAILED_PRECONDITION not_member, OUT_OF_RANGE future_token, ALREADY_EXISTS duplicate, any other
// invalid.
RejectionReason AggregatorRejection(absl::StatusCode code);

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_REJECTION_REASON_H_
