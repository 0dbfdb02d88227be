#include "libs/data/criteo_files.h"

#include <glob.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "libs/common/status_macros.h"

namespace syncopate::data {
namespace {

constexpr size_t kChunkBytes = 1u << 18;
// ParseCriteoTsv rejects lines over 65536 bytes; a longer run without '\n' is handed to it as one
// line (so it fails with its message) instead of growing the buffer without bound.
constexpr size_t kLongestLine = (size_t{1} << 16) + 2;

absl::Status WithPath(const absl::Status& status, const std::string& path) {
  return absl::Status(status.code(), absl::StrCat("Criteo file '", path, "': ", status.message()));
}

void Append(CtrDataset&& part, CtrDataset& out) {
  if (out.size == 0) {
    out = std::move(part);
    return;
  }
  out.size += part.size;
  out.labels.insert(out.labels.end(), part.labels.begin(), part.labels.end());
  out.numeric.insert(out.numeric.end(), part.numeric.begin(), part.numeric.end());
  out.categorical.insert(out.categorical.end(), part.categorical.begin(), part.categorical.end());
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandDataPaths(const std::string& spec) {
  std::vector<std::string> paths;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("the dataset path is empty");
  }
  for (absl::string_view element : absl::StrSplit(spec, ',')) {
    const std::string pattern(absl::StripAsciiWhitespace(element));
    if (pattern.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty element in dataset path '", spec, "'"));
    }
    if (pattern.find_first_of("*?[") == std::string::npos) {
      paths.push_back(pattern);  // a plain path: opening it reports a missing file
      continue;
    }
    glob_t matches{};
    // GLOB_MARK appends '/' to directories, which are skipped.
    const int result = glob(pattern.c_str(), GLOB_ERR | GLOB_MARK, nullptr, &matches);
    std::vector<std::string> found;
    for (size_t i = 0; result == 0 && i < matches.gl_pathc; ++i) {
      std::string match = matches.gl_pathv[i];
      if (!match.empty() && match.back() != '/') found.push_back(std::move(match));
    }
    globfree(&matches);
    if (result != 0 && result != GLOB_NOMATCH) {
      return absl::UnknownError(
          absl::StrCat("cannot expand '", pattern, "': a directory could not be read"));
    }
    if (found.empty()) return absl::NotFoundError(absl::StrCat("no file matches '", pattern, "'"));
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

absl::StatusOr<std::unique_ptr<CriteoFiles>> CriteoFiles::Open(const std::string& spec,
                                                               const CriteoFilesOptions& options) {
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandDataPaths(spec));
  return OpenPaths(std::move(paths), options);
}

absl::StatusOr<std::unique_ptr<CriteoFiles>> CriteoFiles::OpenPaths(
    std::vector<std::string> paths, const CriteoFilesOptions& options) {
  if (options.limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit must be >= 0, got ", options.limit));
  }
  if (options.max_seek_points < 1 || options.min_spacing_bytes < 1) {
    return absl::InvalidArgumentError("max_seek_points and min_spacing_bytes must be >= 1");
  }
  std::unique_ptr<CriteoFiles> files(new CriteoFiles());
  files->paths_ = std::move(paths);
  SYNCOPATE_RETURN_IF_ERROR(files->Scan(options));
  return files;
}

absl::Status CriteoFiles::Scan(const CriteoFilesOptions& options) {
  int64_t spacing = options.min_spacing_bytes;
  int64_t newlines = 0;  // complete lines before the stream's position, over all files
  std::string chunk(kChunkBytes, '\0');
  std::string pending;  // validate: the partial line after the last complete one
  const auto full = [&] { return options.limit > 0 && newlines >= options.limit; };
  for (size_t f = 0; f < paths_.size() && !full(); ++f) {
    file_first_row_.push_back(newlines);
    SYNCOPATE_ASSIGN_OR_RETURN(std::unique_ptr<TextStream> stream, TextStream::Open(paths_[f]));
    bool at_line_start = true;
    int64_t last_point = 0;
    int64_t file_line = 0;  // validate: lines parsed in this file
    pending.clear();
    while (!stream->eof() && !full()) {
      if (stream->resumable() && stream->position() - last_point >= spacing) {
        last_point = stream->position();
        points_.push_back(Point{.file = static_cast<int>(f),
                                .first_row = newlines + (at_line_start ? 0 : 1),
                                .at_line_start = at_line_start,
                                .point = stream->Here()});
        if (static_cast<int64_t>(points_.size()) > options.max_seek_points) {
          // Keep every other point: the index stays bounded and its spacing doubles.
          size_t kept = 0;
          for (size_t i = 1; i < points_.size(); i += 2) points_[kept++] = std::move(points_[i]);
          points_.resize(kept);
          spacing *= 2;
        }
      }
      SYNCOPATE_ASSIGN_OR_RETURN(const size_t got, stream->Read(chunk.data(), chunk.size()));
      if (got == 0) continue;
      const std::string_view text(chunk.data(), got);
      newlines += std::count(text.begin(), text.end(), '\n');
      at_line_start = text.back() == '\n';
      if (!options.validate) continue;
      pending.append(text);
      const size_t complete = pending.rfind('\n');
      if (complete == std::string::npos && pending.size() < kLongestLine) continue;
      const size_t cut = complete == std::string::npos ? pending.size() : complete + 1;
      absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(
          std::string_view(pending).substr(0, cut),
          options.limit > 0 ? options.limit - (file_first_row_.back() + file_line) : 0,
          file_line + 1);
      if (!parsed.ok()) return WithPath(parsed.status(), paths_[f]);
      file_line += parsed->size;
      pending.erase(0, cut);
    }
    if (!at_line_start && !full()) {  // a last line without '\n' is a row too
      if (options.validate) {
        absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(pending, 0, file_line + 1);
        if (!parsed.ok()) return WithPath(parsed.status(), paths_[f]);
      }
      ++newlines;
    }
  }
  rows_ = options.limit > 0 ? std::min(newlines, options.limit) : newlines;
  file_first_row_.push_back(rows_);
  // Points past the limit are never used.
  while (!points_.empty() && points_.back().first_row >= rows_) points_.pop_back();
  return absl::OkStatus();
}

int64_t CriteoFiles::index_bytes() const {
  int64_t bytes = static_cast<int64_t>(file_first_row_.capacity() * sizeof(int64_t));
  for (const Point& point : points_)
    bytes += point.point.bytes() + sizeof(Point) - sizeof(SeekPoint);
  for (const std::string& path : paths_) bytes += static_cast<int64_t>(path.capacity());
  return bytes;
}

absl::Status CriteoFiles::Position(int file, const Point* point) {
  cursor_.stream.reset();
  cursor_.buffer.clear();
  cursor_.offset = 0;
  SYNCOPATE_ASSIGN_OR_RETURN(
      cursor_.stream, TextStream::Open(paths_[file], point != nullptr ? &point->point : nullptr));
  cursor_.file = file;
  cursor_.row = point != nullptr ? point->first_row : file_first_row_[file];
  if (point != nullptr && !point->at_line_start) {
    std::string_view partial;
    SYNCOPATE_ASSIGN_OR_RETURN(const bool found, NextLine(&partial));
    if (!found) return Changed();
  }
  return absl::OkStatus();
}

absl::Status CriteoFiles::Changed() const {
  return absl::DataLossError(absl::StrCat("Criteo file '", paths_[cursor_.file],
                                          "' no longer holds the rows counted when it was opened"));
}

absl::StatusOr<bool> CriteoFiles::NextLine(std::string_view* line) {
  Cursor& c = cursor_;
  while (true) {
    const size_t newline = c.buffer.find('\n', c.offset);
    if (newline != std::string::npos) {
      *line = std::string_view(c.buffer).substr(c.offset, newline - c.offset);
      c.offset = newline + 1;
      return true;
    }
    if (c.buffer.size() - c.offset >= kLongestLine ||
        (c.stream->eof() && c.offset < c.buffer.size())) {
      *line = std::string_view(c.buffer).substr(c.offset);
      c.offset = c.buffer.size();
      return true;
    }
    if (c.stream->eof()) return false;
    c.buffer.erase(0, c.offset);
    c.offset = 0;
    const size_t before = c.buffer.size();
    c.buffer.resize(before + kChunkBytes);
    absl::StatusOr<size_t> got = c.stream->Read(c.buffer.data() + before, kChunkBytes);
    if (!got.ok()) {
      c.buffer.resize(before);
      return got.status();
    }
    c.buffer.resize(before + *got);
  }
}

absl::StatusOr<CtrDataset> CriteoFiles::Read(int64_t begin, int64_t end) {
  absl::StatusOr<CtrDataset> rows = ReadRows(begin, end);
  // After a failure the stream's position and cursor_.row may disagree: the next read seeks.
  if (!rows.ok()) cursor_ = Cursor();
  return rows;
}

absl::StatusOr<CtrDataset> CriteoFiles::ReadRows(int64_t begin, int64_t end) {
  if (begin < 0 || end < begin || end > rows_) {
    return absl::OutOfRangeError(
        absl::StrCat("rows [", begin, ", ", end, ") are outside [0, ", rows_, ")"));
  }
  CtrDataset out;
  if (begin == end) return out;
  int file =
      static_cast<int>(std::upper_bound(file_first_row_.begin(), file_first_row_.end(), begin) -
                       file_first_row_.begin() - 1);
  // The last point of `file` at or before `begin`; none: the file's start.
  const auto after = std::upper_bound(points_.begin(), points_.end(), std::make_pair(file, begin),
                                      [](const std::pair<int, int64_t>& key, const Point& p) {
                                        return key.first < p.file ||
                                               (key.first == p.file && key.second < p.first_row);
                                      });
  const Point* point =
      after != points_.begin() && (after - 1)->file == file ? &*(after - 1) : nullptr;
  const int64_t point_row = point != nullptr ? point->first_row : file_first_row_[file];
  const bool continue_cursor = cursor_.stream != nullptr && cursor_.file == file &&
                               cursor_.row <= begin && cursor_.row >= point_row;
  if (!continue_cursor) SYNCOPATE_RETURN_IF_ERROR(Position(file, point));
  std::string_view line;
  while (cursor_.row < begin) {
    SYNCOPATE_ASSIGN_OR_RETURN(const bool found, NextLine(&line));
    if (!found) return Changed();
    ++cursor_.row;
  }
  // The rows' text, one file at a time, parsed with the file's own line numbers.
  std::string text;
  int64_t first_line = cursor_.row - file_first_row_[cursor_.file] + 1;
  const auto parse = [&]() -> absl::Status {
    absl::StatusOr<CtrDataset> part = ParseCriteoTsv(text, 0, first_line);
    if (!part.ok()) return WithPath(part.status(), paths_[cursor_.file]);
    Append(*std::move(part), out);
    text.clear();
    return absl::OkStatus();
  };
  while (cursor_.row < end) {
    SYNCOPATE_ASSIGN_OR_RETURN(const bool found, NextLine(&line));
    if (found) {
      text.append(line);
      text.push_back('\n');
      ++cursor_.row;
      continue;
    }
    if (cursor_.row != file_first_row_[cursor_.file + 1]) return Changed();
    SYNCOPATE_RETURN_IF_ERROR(parse());
    SYNCOPATE_RETURN_IF_ERROR(Position(cursor_.file + 1, nullptr));
    first_line = 1;
  }
  SYNCOPATE_RETURN_IF_ERROR(parse());
  if (out.size != end - begin) {
    return absl::DataLossError(absl::StrCat("Criteo file '", paths_[cursor_.file], "': read ",
                                            out.size, " rows for [", begin, ", ", end, ")"));
  }
  return out;
}

absl::StatusOr<CtrDataset> ReadCriteoTsv(const std::string& path, int64_t limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be >= 0 (0 = all examples), got ", limit));
  }
  SYNCOPATE_ASSIGN_OR_RETURN(std::unique_ptr<CriteoFiles> files,
                             CriteoFiles::OpenPaths({path}, {.limit = limit}));
  return files->Read(0, files->rows());
}

}  // namespace syncopate::data
