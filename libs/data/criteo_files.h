// CriteoFiles: a Criteo-format dataset that stays on disk — one file, a list, or globs, plain or
// gzip — read a range of rows at a time, so a worker's memory does not grow with the dataset
// (issue 13: a day of click logs is tens of millions of rows over many files; in memory a row
// costs ~264 bytes).
//
// Rows are numbered across the files in order (each pattern's matches sorted by name). Opening
// makes one pass over the data that counts the rows and records seek points (TextStream): where
// a reader can resume a file without inflating what comes before. A gzip stream can only be
// entered at a deflate block boundary with the 32 KiB before it, so the points are spaced at
// least `min_spacing_bytes` apart and at most `max_seek_points` are kept (when the cap is hit,
// every other point goes and the spacing doubles): the index is bounded (by default 512 points,
// <= 16 MiB and typically 3-5 MiB of compressed windows) whatever the dataset's size, and reading
// rows [begin, end) inflates at most one spacing of text before `begin`. A file's start is always
// a point. Every read parses only the rows asked for, with ReadCriteoTsv's line rules and errors
// naming the file and its line.
//
// Thread-safety: thread-compatible. Read keeps a cursor (consecutive ranges continue without
// seeking), so one reader owns an instance.
#ifndef SYNCOPATE_LIBS_DATA_CRITEO_FILES_H_
#define SYNCOPATE_LIBS_DATA_CRITEO_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/data/criteo_reader.h"
#include "libs/data/text_stream.h"

namespace syncopate::data {

// The files a dataset path names, in order: `spec` is one or more comma-separated paths or glob
// patterns (glob(3): *, ?, [...]); each pattern's matches are sorted by name. Errors:
// INVALID_ARGUMENT (an empty spec or element), NOT_FOUND ("no file matches 'pattern'"), UNKNOWN
// (glob failed reading a directory).
absl::StatusOr<std::vector<std::string>> ExpandDataPaths(const std::string& spec);

struct CriteoFilesOptions {
  // Keep only the first `limit` rows (0 = all); the pass stops there.
  int64_t limit = 0;
  // Parse every row during the pass, so a bad line fails Open (the coordinator validates before
  // any worker starts) rather than the read that reaches it.
  bool validate = false;
  int64_t max_seek_points = 512;
  int64_t min_spacing_bytes = int64_t{1} << 20;
};

class CriteoFiles {
 public:
  // Expands `spec` (ExpandDataPaths) and makes the pass. Errors: ExpandDataPaths', the file's
  // (NOT_FOUND, PERMISSION_DENIED, DATA_LOSS for a corrupt gzip stream), with `validate` any bad
  // line (DATA_LOSS "Criteo file 'x': line 17: ..."); INVALID_ARGUMENT for a negative limit or a
  // non-positive point cap or spacing.
  static absl::StatusOr<std::unique_ptr<CriteoFiles>> Open(const std::string& spec,
                                                           const CriteoFilesOptions& options);
  // The same for a list of paths taken literally (no globs, no commas).
  static absl::StatusOr<std::unique_ptr<CriteoFiles>> OpenPaths(std::vector<std::string> paths,
                                                                const CriteoFilesOptions& options);

  // Rows in the dataset (after the limit).
  int64_t rows() const { return rows_; }
  const std::vector<std::string>& paths() const { return paths_; }
  // Seek points kept and the memory they hold (the index's size).
  int64_t seek_points() const { return static_cast<int64_t>(points_.size()); }
  int64_t index_bytes() const;

  // Rows [begin, end) parsed, 0 <= begin <= end <= rows(). A range right after the previous one
  // continues the open file; any other resumes from the nearest seek point at or before `begin`.
  // Errors: OUT_OF_RANGE for a bad range; DATA_LOSS for a bad line (named by file and line), a
  // corrupt stream, or a file that no longer holds the rows the pass counted (it changed).
  absl::StatusOr<CtrDataset> Read(int64_t begin, int64_t end);

 private:
  struct Point {
    int file;
    int64_t first_row;   // the first row that starts at or after point.out (global numbering)
    bool at_line_start;  // point.out is the start of that row (else skip to the next '\n')
    SeekPoint point;
  };
  struct Cursor {
    int file = -1;
    int64_t row = 0;  // the row the stream's next line is
    std::unique_ptr<TextStream> stream;
    std::string buffer;  // read and not yet consumed: [offset, size)
    size_t offset = 0;
  };

  CriteoFiles() = default;
  absl::Status Scan(const CriteoFilesOptions& options);
  absl::StatusOr<CtrDataset> ReadRows(int64_t begin, int64_t end);
  // Opens file `file` at `point` (nullptr: its start) as the cursor.
  absl::Status Position(int file, const Point* point);
  // The next line of the cursor's file without its '\n'; false at the file's end.
  absl::StatusOr<bool> NextLine(std::string_view* line);
  // The cursor's file ended before the rows the pass counted.
  absl::Status Changed() const;

  std::vector<std::string> paths_;
  std::vector<int64_t> file_first_row_;  // per file, its first row's global number
  std::vector<Point> points_;            // ordered by (file, first_row)
  int64_t rows_ = 0;
  Cursor cursor_;
};

// Reads a Criteo file, gzip-compressed or plain, into memory (CriteoFiles reads rows of one or
// many files without holding them all). Same `limit` and line rules as ParseCriteoTsv; under a
// limit the rest of the file is not read.
//
// Errors:
//   INVALID_ARGUMENT  `limit` < 0.
//   NOT_FOUND         the file does not exist (the message names the path).
//   DATA_LOSS         a corrupt or truncated gzip stream, or a bad line (the message is the path
//                     followed by ParseCriteoTsv's message, e.g. "Criteo file 'x.gz': line 17:
//                     field C3: bad hex 'zz'").
//   other             the file cannot be opened or read (e.g. PERMISSION_DENIED).
absl::StatusOr<CtrDataset> ReadCriteoTsv(const std::string& path, int64_t limit);

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_CRITEO_FILES_H_
