#include "libs/isa/isa.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace syncopate::isa {
namespace {

// What benchmarks print as the machine they ran on: the CPU, the cores, the kernels' level.
TEST(MachineDescription, NamesTheCpuCoresAndKernels) {
  const std::string machine = MachineDescription();
  EXPECT_NE(machine.find(" cores, kernels isa "), std::string::npos) << machine;
  EXPECT_NE(machine.find(IsaDescription(ActiveIsaLevel())), std::string::npos) << machine;
  EXPECT_FALSE(machine.starts_with(",")) << machine;
}

TEST(IsaLevel, ParsesNamesAndAliases) {
  EXPECT_EQ(ParseIsaLevel("baseline").value(), IsaLevel::kBaseline);
  EXPECT_EQ(ParseIsaLevel("x86-64").value(), IsaLevel::kBaseline);
  EXPECT_EQ(ParseIsaLevel("V3").value(), IsaLevel::kV3);
  EXPECT_EQ(ParseIsaLevel("avx2").value(), IsaLevel::kV3);
  EXPECT_EQ(ParseIsaLevel("x86-64-v4").value(), IsaLevel::kV4);
  EXPECT_EQ(ParseIsaLevel("avx512").value(), IsaLevel::kV4);
  EXPECT_FALSE(ParseIsaLevel("v5").ok());
  for (const IsaLevel level : {IsaLevel::kBaseline, IsaLevel::kV3, IsaLevel::kV4}) {
    EXPECT_EQ(ParseIsaLevel(IsaLevelName(level)).value(), level);
  }
}

TEST(IsaLevel, OverrideWinsOnlyWhenSupported) {
  EXPECT_EQ(ChooseIsaLevel(std::nullopt, IsaLevel::kV4).value(), IsaLevel::kV4);
  EXPECT_EQ(ChooseIsaLevel("", IsaLevel::kV3).value(), IsaLevel::kV3);
  EXPECT_EQ(ChooseIsaLevel("baseline", IsaLevel::kV4).value(), IsaLevel::kBaseline);
  EXPECT_EQ(ChooseIsaLevel("v3", IsaLevel::kV4).value(), IsaLevel::kV3);
  // Running AVX-512 code on an AVX2 machine dies on an illegal instruction: refused.
  EXPECT_TRUE(absl::IsFailedPrecondition(ChooseIsaLevel("v4", IsaLevel::kV3).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ChooseIsaLevel("fast", IsaLevel::kV4).status()));
}

TEST(IsaLevel, SupportedLevelsStartAtBaselineAndEndAtHighest) {
  const std::vector<IsaLevel> levels = SupportedIsaLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), IsaLevel::kBaseline);
  EXPECT_EQ(levels.back(), HighestSupportedIsaLevel());
  EXPECT_LE(ActiveIsaLevel(), HighestSupportedIsaLevel());
}

}  // namespace
}  // namespace syncopate::isa
