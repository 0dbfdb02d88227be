#include "libs/common/mode_rules.h"

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace syncopate {
namespace {

using ::testing::HasSubstr;

// Every mode the wire contract names (but MODE_UNSPECIFIED) has exactly its own row, found by
// its number and by its name: a mode added to the proto without a row fails here.
TEST(ModeRules, EveryModeOfTheProtoHasItsRow) {
  const google::protobuf::EnumDescriptor* modes = v1::Mode_descriptor();
  std::set<std::string> names;
  for (int i = 0; i < modes->value_count(); ++i) {
    const auto mode = static_cast<v1::Mode>(modes->value(i)->number());
    if (mode == v1::MODE_UNSPECIFIED) continue;
    const ModeRules* row = FindModeRules(mode);
    ASSERT_NE(row, nullptr) << modes->value(i)->name() << " has no row in kModeRules";
    EXPECT_EQ(row->mode, mode);
    EXPECT_FALSE(row->name.empty()) << modes->value(i)->name();
    EXPECT_TRUE(names.insert(std::string(row->name)).second) << "two rows named " << row->name;
    EXPECT_EQ(ModeName(mode), row->name);
    absl::StatusOr<v1::Mode> parsed = ParseMode(row->name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  // No row for a number the proto does not name, and one row per named mode.
  EXPECT_EQ(kModeRules.size(), static_cast<size_t>(modes->value_count() - 1));
  for (const ModeRules& row : kModeRules) {
    EXPECT_NE(modes->FindValueByNumber(row.mode), nullptr) << row.name;
  }
}

TEST(ModeRules, UnspecifiedAndUnknownNumbersHaveNoRow) {
  for (const auto mode : {v1::MODE_UNSPECIFIED, static_cast<v1::Mode>(42)}) {
    EXPECT_EQ(FindModeRules(mode), nullptr);
    EXPECT_EQ(ModeName(mode), "unspecified");
    EXPECT_FALSE(IsShardMode(mode));
    EXPECT_FALSE(HasBarrier(mode));
    EXPECT_FALSE(MeasuresStalenessCost(mode));
    EXPECT_FALSE(LooksAhead(mode));
    EXPECT_EQ(NextPullMinVersion(mode, 7), 0);
  }
}

// The rules of today's four modes, exactly (docs/architecture.md, "A sync step", "The gba path").
TEST(ModeRules, TheFourModes) {
  EXPECT_EQ(ModeName(v1::MODE_SYNC), "sync");
  EXPECT_EQ(ModeName(v1::MODE_GBA), "gba");
  EXPECT_EQ(ModeName(v1::MODE_ASYNC), "async");
  EXPECT_EQ(ModeName(v1::MODE_AUTO), "auto");
  // A shard runs sync, gba and async; auto is the coordinator's choice among them.
  EXPECT_TRUE(IsShardMode(v1::MODE_SYNC));
  EXPECT_TRUE(IsShardMode(v1::MODE_GBA));
  EXPECT_TRUE(IsShardMode(v1::MODE_ASYNC));
  EXPECT_FALSE(IsShardMode(v1::MODE_AUTO));
  // Only sync has a barrier, so only there does the next pull wait for token + 1.
  EXPECT_TRUE(HasBarrier(v1::MODE_SYNC));
  EXPECT_FALSE(HasBarrier(v1::MODE_GBA));
  EXPECT_FALSE(HasBarrier(v1::MODE_ASYNC));
  EXPECT_EQ(NextPullMinVersion(v1::MODE_SYNC, 7), 8);
  EXPECT_EQ(NextPullMinVersion(v1::MODE_GBA, 7), 0);
  EXPECT_EQ(NextPullMinVersion(v1::MODE_ASYNC, 7), 0);
  // Only sync's updates are means of fresh gradients on the same parameters.
  EXPECT_TRUE(MeasuresStalenessCost(v1::MODE_SYNC));
  EXPECT_FALSE(MeasuresStalenessCost(v1::MODE_GBA));
  EXPECT_FALSE(MeasuresStalenessCost(v1::MODE_ASYNC));
  // Only gba has a pending update without a barrier to look ahead to.
  EXPECT_FALSE(LooksAhead(v1::MODE_SYNC));
  EXPECT_TRUE(LooksAhead(v1::MODE_GBA));
  EXPECT_FALSE(LooksAhead(v1::MODE_ASYNC));
  EXPECT_EQ(kDefaultMode, v1::MODE_SYNC);
}

// The order reports list the modes in (the run report's timeline levels, bottom up).
TEST(ModeRules, TableOrderIsSyncGbaAsyncAuto) {
  std::vector<std::string> names;
  for (const ModeRules& row : kModeRules) names.emplace_back(row.name);
  EXPECT_THAT(names, ::testing::ElementsAre("sync", "gba", "async", "auto"));
}

TEST(ParseMode, RejectsAnythingElseNamingTheChoices) {
  for (const char* name : {"", "SYNC", "Sync", "gba ", "barrier", "unspecified"}) {
    absl::StatusOr<v1::Mode> mode = ParseMode(name);
    EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument) << "'" << name << "'";
  }
  EXPECT_EQ(ParseMode("fast").status().message(),
            "unknown mode 'fast' (expected sync, gba, async or auto)");
}

TEST(ModeChoices, ListTheRowsForMessages) {
  EXPECT_EQ(ModeNameChoices(), "sync, gba, async or auto");
  EXPECT_EQ(ModeNameChoices({"async-scaled"}), "sync, gba, async, auto or async-scaled");
  EXPECT_EQ(ModeEnumChoices(), "MODE_SYNC, MODE_GBA, MODE_ASYNC or MODE_AUTO");
}

}  // namespace
}  // namespace syncopate
