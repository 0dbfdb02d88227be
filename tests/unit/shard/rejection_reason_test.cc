#include "libs/shard/rejection_reason.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace syncopate::shard {
namespace {

// Each reason has its own metric label: two reasons sharing one would merge their counts.
TEST(RejectionReason, EveryReasonHasItsOwnLabel) {
  std::set<std::string> names;
  for (RejectionReason reason : kAllRejectionReasons) {
    const std::string name(RejectionReasonName(reason));
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
  }
  EXPECT_EQ(names.size(), 17u);
  EXPECT_EQ(RejectionReasonName(RejectionReason::kDuplicateKey), "duplicate_key");
}

TEST(RejectionReason, AggregatorCodesMapToReasons) {
  EXPECT_EQ(AggregatorRejection(absl::StatusCode::kFailedPrecondition),
            RejectionReason::kNotMember);
  EXPECT_EQ(AggregatorRejection(absl::StatusCode::kOutOfRange), RejectionReason::kFutureToken);
  EXPECT_EQ(AggregatorRejection(absl::StatusCode::kAlreadyExists), RejectionReason::kDuplicate);
  EXPECT_EQ(AggregatorRejection(absl::StatusCode::kInvalidArgument), RejectionReason::kInvalid);
}

}  // namespace
}  // namespace syncopate::shard
