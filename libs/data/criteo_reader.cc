#include "libs/data/criteo_reader.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "libs/common/status_macros.h"

namespace syncopate::data {
namespace {

constexpr int kCriteoFields = 1 + kCriteoNumeric + kCriteoCategorical;
// A real line is about 300 bytes and no valid line exceeds ~700 (19-digit integers, 15-digit
// hex). The cap bounds the reader's buffer when a file has no line breaks at all.
constexpr size_t kMaxLineBytes = 65536;

absl::Status LimitError(int64_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat("limit must be >= 0 (0 = all examples), got ", limit));
}

// "I7", "C3", "label": the names Criteo's documentation uses for the columns.
std::string FieldName(int field) {
  if (field == 0) return "label";
  if (field <= kCriteoNumeric) return absl::StrCat("I", field);
  return absl::StrCat("C", field - kCriteoNumeric);
}

// A field's text for an error message: escaped (fuzzed input is binary) and cut short.
std::string Shown(std::string_view value) {
  constexpr size_t kShown = 40;
  // Debian's Abseil has its own string_view type.
  const std::string_view shown = value.substr(0, kShown);
  return absl::StrCat("'", absl::CHexEscape(absl::string_view(shown.data(), shown.size())),
                      value.size() > kShown ? "...'" : "'");
}

// Decimal with an optional '-', in int64's range. At most 19 digits, so the unsigned sum cannot
// overflow before the range check.
bool ParseInteger(std::string_view text, int64_t* value) {
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty() || text.size() > 19) return false;
  uint64_t magnitude = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    magnitude = magnitude * 10 + static_cast<uint64_t>(c - '0');
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  if (magnitude > kMax + (negative ? 1 : 0)) return false;
  // Negating in unsigned arithmetic keeps INT64_MIN representable.
  *value =
      negative ? static_cast<int64_t>(uint64_t{0} - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

// 1 to 15 hex digits, either case (< 2^60: never kMissingCategory).
bool ParseHex(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 15) return false;
  uint64_t result = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    result = (result << 4) | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

// Turns lines into rows, one at a time, so the in-memory parser and the streaming file reader
// share every rule and every message.
class CriteoParser {
 public:
  CriteoParser(int64_t limit, int64_t first_line) : limit_(limit), line_number_(first_line - 1) {}

  bool full() const { return limit_ > 0 && dataset_.size >= limit_; }

  // `line` is one line without its '\n'.
  absl::Status ParseLine(std::string_view line) {
    ++line_number_;
    if (line.size() > kMaxLineBytes) {
      return Error(absl::StrCat("longer than ", kMaxLineBytes, " bytes"));
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const int64_t tabs = std::count(line.begin(), line.end(), '\t');
    if (tabs != kCriteoFields - 1) {
      return Error(
          absl::StrCat("expected ", kCriteoFields, " tab-separated fields, found ", tabs + 1));
    }
    float label = 0;
    std::array<float, kCriteoNumeric> numeric;
    std::array<uint64_t, kCriteoCategorical> categorical;
    size_t begin = 0;
    for (int field = 0; field < kCriteoFields; ++field) {
      const size_t end = std::min(line.find('\t', begin), line.size());
      const std::string_view value = line.substr(begin, end - begin);
      begin = end + 1;
      if (field == 0) {
        if (value != "0" && value != "1") {
          return Error(absl::StrCat("field label: expected 0 or 1, got ", Shown(value)));
        }
        label = value == "1" ? 1.0f : 0.0f;
      } else if (field <= kCriteoNumeric) {
        float& out = numeric[field - 1];
        int64_t integer = 0;
        if (value.empty()) {
          out = std::numeric_limits<float>::quiet_NaN();
        } else if (ParseInteger(value, &integer)) {
          out = static_cast<float>(integer);
        } else {
          return Error(absl::StrCat("field ", FieldName(field), ": bad integer ", Shown(value)));
        }
      } else {
        uint64_t& out = categorical[field - 1 - kCriteoNumeric];
        if (value.empty()) {
          out = kMissingCategory;
        } else if (!ParseHex(value, &out)) {
          return Error(absl::StrCat("field ", FieldName(field), ": bad hex ", Shown(value)));
        }
      }
    }
    dataset_.labels.push_back(label);
    dataset_.numeric.insert(dataset_.numeric.end(), numeric.begin(), numeric.end());
    dataset_.categorical.insert(dataset_.categorical.end(), categorical.begin(), categorical.end());
    ++dataset_.size;
    return absl::OkStatus();
  }

  CtrDataset Finish() && { return std::move(dataset_); }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("line ", line_number_, ": ", what));
  }

  const int64_t limit_;
  int64_t line_number_;
  CtrDataset dataset_;
};

// Feeds every complete line of `text[*consumed..]` to `parser` (until it is full) and advances
// `*consumed` past them; a final piece without '\n' is left.
absl::Status ParseCompleteLines(std::string_view text, size_t* consumed, CriteoParser& parser) {
  while (!parser.full()) {
    const size_t newline = text.find('\n', *consumed);
    if (newline == std::string_view::npos) break;
    SYNCOPATE_RETURN_IF_ERROR(parser.ParseLine(text.substr(*consumed, newline - *consumed)));
    *consumed = newline + 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CtrDataset> ParseCriteoTsv(std::string_view text, int64_t limit) {
  return ParseCriteoTsv(text, limit, 1);
}

absl::StatusOr<CtrDataset> ParseCriteoTsv(std::string_view text, int64_t limit,
                                          int64_t first_line) {
  if (limit < 0) return LimitError(limit);
  if (first_line < 1) {
    return absl::InvalidArgumentError(absl::StrCat("first_line must be >= 1, got ", first_line));
  }
  CriteoParser parser(limit, first_line);
  size_t consumed = 0;
  SYNCOPATE_RETURN_IF_ERROR(ParseCompleteLines(text, &consumed, parser));
  if (!parser.full() && consumed < text.size()) {
    SYNCOPATE_RETURN_IF_ERROR(parser.ParseLine(text.substr(consumed)));
  }
  return std::move(parser).Finish();
}

}  // namespace syncopate::data
