#include "libs/common/mode_rules.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace syncopate {
namespace {

// "a, b, c or d".
std::string OneOf(const std::vector<absl::string_view>& words) {
  if (words.size() < 2) return absl::StrJoin(words, "");
  return absl::StrCat(absl::StrJoin(words.begin(), words.end() - 1, ", "), " or ", words.back());
}

}  // namespace

std::string ModeName(v1::Mode mode) {
  const ModeRules* row = FindModeRules(mode);
  return row != nullptr ? std::string(row->name) : "unspecified";
}

absl::StatusOr<v1::Mode> ParseMode(absl::string_view name) {
  for (const ModeRules& row : kModeRules) {
    if (row.name == name) return row.mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", name, "' (expected ", ModeNameChoices(), ")"));
}

std::string ModeNameChoices(std::initializer_list<absl::string_view> more) {
  std::vector<absl::string_view> words;
  for (const ModeRules& row : kModeRules) words.push_back(row.name);
  words.insert(words.end(), more.begin(), more.end());
  return OneOf(words);
}

std::string ModeEnumChoices() {
  std::vector<absl::string_view> words;
  for (const ModeRules& row : kModeRules) words.push_back(v1::Mode_Name(row.mode));
  return OneOf(words);
}

}  // namespace syncopate
