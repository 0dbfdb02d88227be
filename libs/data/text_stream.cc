#include "libs/data/text_stream.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/data/gzip_file.h"

namespace syncopate::data {
namespace {

// Deflate's largest back-reference distance (RFC 1951 §3.2.5): the history a resumed inflate needs.
constexpr size_t kWindowBytes = 32768;
constexpr size_t kInputBytes = 1u << 18;
constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};

}  // namespace

TextStream::TextStream(std::string path, std::FILE* file, bool gzip)
    : path_(std::move(path)), file_(file), gzip_(gzip) {}

TextStream::~TextStream() {
  if (inflating_) inflateEnd(&zs_);
  std::fclose(file_);
}

absl::StatusOr<std::unique_ptr<TextStream>> TextStream::Open(const std::string& path,
                                                             const SeekPoint* from) {
  errno = 0;
  // "e": O_CLOEXEC, so processes we spawn do not inherit the descriptor.
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) return OpenFileError(errno, "file", path);
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, file);
  const bool gzip = got == 2 && magic[0] == kGzipMagic[0] && magic[1] == kGzipMagic[1];
  std::unique_ptr<TextStream> stream(new TextStream(path, file, gzip));
  if (!gzip) {
    const int64_t at = from != nullptr ? from->out : 0;
    if (fseeko(file, at, SEEK_SET) != 0) {
      return absl::UnknownError(absl::StrCat("cannot seek '", path, "': ", std::strerror(errno)));
    }
    stream->out_ = at;
    return stream;
  }
  stream->input_.resize(kInputBytes);
  if (from != nullptr && from->out > 0) {
    SYNCOPATE_RETURN_IF_ERROR(stream->StartRaw(*from));
    return stream;
  }
  if (fseeko(file, 0, SEEK_SET) != 0) {
    return absl::UnknownError(absl::StrCat("cannot seek '", path, "': ", std::strerror(errno)));
  }
  // 31: a gzip wrapper (header and trailer checked) around deflate with a 32 KiB window.
  if (inflateInit2(&stream->zs_, 31) != Z_OK) return absl::ResourceExhaustedError("inflateInit2");
  stream->inflating_ = true;
  stream->keep_window_ = true;
  return stream;
}

absl::Status TextStream::StartRaw(const SeekPoint& from) {
  // The byte before `in` holds the first `bits` bits of the block (zran.c's inflatePrime).
  const int64_t at = from.in - (from.bits != 0 ? 1 : 0);
  if (at < 0 || from.bits < 0 || from.bits > 7 || fseeko(file_, at, SEEK_SET) != 0) {
    return absl::DataLossError(
        absl::StrCat("'", path_, "': the seek point at byte ", from.in, " does not fit the file"));
  }
  file_pos_ = at;
  // -15: raw deflate, no wrapper: the point sits inside a member.
  if (inflateInit2(&zs_, -15) != Z_OK) return absl::ResourceExhaustedError("inflateInit2");
  inflating_ = true;
  raw_ = true;
  if (from.bits != 0) {
    const int c = std::fgetc(file_);
    if (c == EOF) return Corrupt("shorter than the seek point");
    ++file_pos_;
    inflatePrime(&zs_, from.bits, c >> (8 - from.bits));
  }
  if (from.window_bytes > 0) {
    std::string window(static_cast<size_t>(from.window_bytes), '\0');
    uLongf size = window.size();
    if (from.window_bytes > static_cast<int>(kWindowBytes) ||
        uncompress(reinterpret_cast<Bytef*>(window.data()), &size,
                   reinterpret_cast<const Bytef*>(from.window.data()),
                   from.window.size()) != Z_OK ||
        size != window.size() ||
        inflateSetDictionary(&zs_, reinterpret_cast<const Bytef*>(window.data()),
                             static_cast<uInt>(size)) != Z_OK) {
      return Corrupt("the seek point's window does not inflate");
    }
  }
  out_ = from.out;
  return absl::OkStatus();
}

absl::Status TextStream::Corrupt(const char* what) const {
  return absl::DataLossError(absl::StrCat("'", path_, "' is corrupt: ", what));
}

absl::StatusOr<size_t> TextStream::Refill() {
  if (zs_.avail_in > 0 && zs_.next_in != input_.data()) {
    std::memmove(input_.data(), zs_.next_in, zs_.avail_in);
  }
  zs_.next_in = input_.data();
  const size_t got =
      std::fread(input_.data() + zs_.avail_in, 1, input_.size() - zs_.avail_in, file_);
  if (got == 0 && std::ferror(file_)) {
    return absl::UnknownError(absl::StrCat("cannot read '", path_, "': ", std::strerror(errno)));
  }
  zs_.avail_in += static_cast<uInt>(got);
  file_pos_ += static_cast<int64_t>(got);
  return got;
}

absl::Status TextStream::EnsureInput(size_t n) {
  while (zs_.avail_in < n) {
    SYNCOPATE_ASSIGN_OR_RETURN(const size_t got, Refill());
    if (got == 0) break;
  }
  return absl::OkStatus();
}

absl::Status TextStream::NextMember() {
  // Resumed as raw deflate, the member's 8-byte trailer (CRC-32, size) is still in the input.
  while (trailer_left_ > 0) {
    SYNCOPATE_RETURN_IF_ERROR(EnsureInput(1));
    if (zs_.avail_in == 0) {
      return absl::DataLossError(
          absl::StrCat("'", path_, "' is truncated: the gzip stream ends early"));
    }
    const uInt skip = std::min<uInt>(zs_.avail_in, static_cast<uInt>(trailer_left_));
    zs_.next_in += skip;
    zs_.avail_in -= skip;
    trailer_left_ -= static_cast<int>(skip);
  }
  SYNCOPATE_RETURN_IF_ERROR(EnsureInput(2));
  between_members_ = false;
  if (zs_.avail_in < 2 || zs_.next_in[0] != kGzipMagic[0] || zs_.next_in[1] != kGzipMagic[1]) {
    eof_ = true;  // gzread ignores what follows the last member; so do we
    return absl::OkStatus();
  }
  if (raw_) {
    inflateReset2(&zs_, 31);
    raw_ = false;
  } else {
    inflateReset(&zs_);
  }
  at_boundary_ = false;  // until the next member's header is read
  return absl::OkStatus();
}

void TextStream::Remember(const char* data, size_t size) {
  if (!keep_window_ || size == 0) return;
  history_.append(data, size);
  if (history_.size() > 2 * kWindowBytes) history_.erase(0, history_.size() - kWindowBytes);
}

absl::StatusOr<size_t> TextStream::Read(char* buffer, size_t size) {
  if (eof_ || size == 0) return 0;
  if (!gzip_) {
    const size_t got = std::fread(buffer, 1, size, file_);
    if (got == 0) {
      if (std::ferror(file_)) {
        return absl::UnknownError(
            absl::StrCat("cannot read '", path_, "': ", std::strerror(errno)));
      }
      eof_ = true;
    }
    out_ += static_cast<int64_t>(got);
    return got;
  }
  if (between_members_) {
    SYNCOPATE_RETURN_IF_ERROR(NextMember());
    if (eof_) return 0;
  }
  if (zs_.avail_in == 0) {
    SYNCOPATE_ASSIGN_OR_RETURN(const size_t got, Refill());
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat("'", path_, "' is truncated: the gzip stream ends early"));
    }
  }
  zs_.next_out = reinterpret_cast<Bytef*>(buffer);
  zs_.avail_out = static_cast<uInt>(std::min<size_t>(size, UINT_MAX));
  const uInt before = zs_.avail_out;
  // Z_BLOCK: stop at the end of each deflate block, where a seek point can be taken.
  const int result = inflate(&zs_, Z_BLOCK);
  const size_t produced = before - zs_.avail_out;
  switch (result) {
    case Z_STREAM_END:
      between_members_ = true;
      at_boundary_ = false;
      if (raw_) trailer_left_ = 8;
      break;
    case Z_OK:
    case Z_BUF_ERROR:
      // data_type: 128 = just after an end-of-block code or the header; 64 = in the last block.
      at_boundary_ = (zs_.data_type & 128) != 0 && (zs_.data_type & 64) == 0;
      break;
    default:
      return Corrupt(zs_.msg != nullptr ? zs_.msg : "inflate failed");
  }
  Remember(buffer, produced);
  out_ += static_cast<int64_t>(produced);
  return produced;
}

bool TextStream::resumable() const {
  return !gzip_ || (keep_window_ && inflating_ && at_boundary_ && !between_members_ && !eof_);
}

SeekPoint TextStream::Here() const {
  SeekPoint point;
  point.out = out_;
  if (!gzip_) {
    point.in = out_;
    return point;
  }
  point.in = file_pos_ - zs_.avail_in;
  point.bits = zs_.data_type & 7;
  const size_t keep = std::min(history_.size(), kWindowBytes);
  if (keep > 0 && out_ > 0) {
    point.window_bytes = static_cast<int>(keep);
    uLongf size = compressBound(keep);
    point.window.resize(size);
    // Level 1: the window is compressed once per point and inflated once per seek.
    compress2(reinterpret_cast<Bytef*>(point.window.data()), &size,
              reinterpret_cast<const Bytef*>(history_.data() + history_.size() - keep), keep, 1);
    point.window.resize(size);
    point.window.shrink_to_fit();
  }
  return point;
}

}  // namespace syncopate::data
