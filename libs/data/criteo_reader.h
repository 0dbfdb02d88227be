// Click logs in the Criteo format: the Display Advertising Challenge's train.txt, Criteo 1TB's
// day_N files, and what `syncopate datagen ctr` writes. Each line is one impression:
//
//   label \t I1 \t ... \t I13 \t C1 \t ... \t C26
//
// label is 0 or 1 (clicked); I1..I13 are integer counts (possibly negative, as I2 is in the real
// data) and C1..C26 are categorical values, hashed by Criteo to 32-bit hex strings; any of the 39
// features may be empty (missing).
// Thread-safety: free functions without shared state; safe to call concurrently. CtrDataset is a
// plain value type.
#ifndef SYNCOPATE_LIBS_DATA_CRITEO_READER_H_
#define SYNCOPATE_LIBS_DATA_CRITEO_READER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::data {

inline constexpr int kCriteoNumeric = 13;
inline constexpr int kCriteoCategorical = 26;
// A categorical field that was empty in the file. Parsed values have at most 15 hex digits
// (< 2^60), so no value in a file collides with it.
inline constexpr uint64_t kMissingCategory = ~uint64_t{0};

// Criteo-format click data in memory, one example per row.
struct CtrDataset {
  int64_t size = 0;
  std::vector<float> labels;   // size, 0 or 1
  std::vector<float> numeric;  // size * 13, row-major; the integer as float; empty = NaN
  std::vector<uint64_t>
      categorical;  // size * 26, row-major; the hex value; empty = kMissingCategory

  // The 13 numeric / 26 categorical features of example `i`; `i` must be in [0, size).
  const float* numeric_row(int64_t i) const { return numeric.data() + i * kCriteoNumeric; }
  const uint64_t* categorical_row(int64_t i) const {
    return categorical.data() + i * kCriteoCategorical;
  }
};

// Parses Criteo TSV text. Each line holds exactly 40 tab-separated fields and ends in '\n'; a '\r'
// before it is tolerated, and so is a final line without '\n'. The label is "0" or "1"; I* are
// decimal integers with an optional '-' (in int64 range) or empty; C* are 1 to 15 hex digits
// (either case) or empty. Lines are at most 65536 bytes.
//
// `limit` > 0 keeps the first `limit` examples and does not look at the lines after them; 0 keeps
// all. Empty input is a dataset of 0 rows.
//
// Errors:
//   INVALID_ARGUMENT  `limit` < 0.
//   DATA_LOSS         any other line; the message names the 1-based line number and the field,
//                     e.g. "line 17: field C3: bad hex 'zz'" or "line 4: expected 40 tab-separated
//                     fields, found 39".
absl::StatusOr<CtrDataset> ParseCriteoTsv(std::string_view text, int64_t limit);
// The same for text whose first line is line `first_line` (>= 1) of its file, as errors name it.
absl::StatusOr<CtrDataset> ParseCriteoTsv(std::string_view text, int64_t limit, int64_t first_line);

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_CRITEO_READER_H_
