// TextStream: the bytes of a plain or gzip-compressed file, read sequentially from its start or
// resumed from a SeekPoint taken on an earlier pass, so a reader can jump into the middle of a
// file without inflating everything before it.
//
// A gzip stream cannot be entered at an arbitrary byte: inflating needs the decoder's bit
// position and the 32 KiB of output before that point (deflate's back-reference window). At the
// end of each deflate block both are small, so a pass over the file can record them there; that
// is zlib's examples/zran.c technique (Mark Adler), here with the window stored deflate-compressed
// (text windows shrink ~3-5x). Concatenated gzip members (`cat a.gz b.gz`) are read as one
// stream; bytes after the last member that do not start another member are ignored, as gzread
// ignores them. A file without the gzip magic bytes is read as plain text, where every byte
// offset is a seek point.
//
// Thread-safety: thread-compatible; one reader owns a stream. SeekPoint is a plain value.
#ifndef SYNCOPATE_LIBS_DATA_TEXT_STREAM_H_
#define SYNCOPATE_LIBS_DATA_TEXT_STREAM_H_

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::data {

// Where a TextStream can resume: uncompressed offset `out`, which starts at compressed byte `in`
// (less `bits` bits of the byte before it, gzip only), with the window before it.
struct SeekPoint {
  int64_t out = 0;
  int64_t in = 0;
  int bits = 0;
  std::string window;    // deflate-compressed; empty for plain files and for out == 0
  int window_bytes = 0;  // its uncompressed size

  // Memory the point holds.
  int64_t bytes() const { return static_cast<int64_t>(sizeof(SeekPoint) + window.capacity()); }
};

class TextStream {
 public:
  // Opens `path` at its start, or at `from` (a point taken from this file by Here()). Errors:
  // NOT_FOUND / PERMISSION_DENIED / UNKNOWN (open), DATA_LOSS (a point that does not fit the
  // file: its window does not inflate, or the file is shorter than the point).
  static absl::StatusOr<std::unique_ptr<TextStream>> Open(const std::string& path,
                                                          const SeekPoint* from = nullptr);
  ~TextStream();
  TextStream(const TextStream&) = delete;
  TextStream& operator=(const TextStream&) = delete;

  // Reads up to `size` (> 0) bytes into `buffer`. Returns the count, which may be 0 before the
  // end (a gzip stream stopped at a block boundary); eof() tells the end. DATA_LOSS names the
  // path for a corrupt or truncated gzip stream; UNKNOWN for a failed read.
  absl::StatusOr<size_t> Read(char* buffer, size_t size);
  bool eof() const { return eof_; }

  bool gzip() const { return gzip_; }
  // Uncompressed bytes before the next one Read returns.
  int64_t position() const { return out_; }
  // True when the stream can resume at position() from Here(): always for plain text; for gzip
  // at a deflate block boundary of a stream opened at the file's start (a resumed stream does
  // not keep the window a point needs).
  bool resumable() const;
  // The point at position(); requires resumable().
  SeekPoint Here() const;

 private:
  TextStream(std::string path, std::FILE* file, bool gzip);
  absl::Status StartRaw(const SeekPoint& from);
  // Moves the unread input to the front and reads more; returns the bytes added.
  absl::StatusOr<size_t> Refill();
  absl::Status Corrupt(const char* what) const;
  // Fills input_ so at least `n` unread bytes are there, unless the file ends first.
  absl::Status EnsureInput(size_t n);
  // At a member's end: starts the next member, or ends the stream if no member follows.
  absl::Status NextMember();
  void Remember(const char* data, size_t size);

  const std::string path_;
  std::FILE* const file_;
  const bool gzip_;
  z_stream zs_{};
  bool inflating_ = false;        // zs_ is initialised
  bool raw_ = false;              // inflating raw deflate (resumed from a point), not a gzip member
  bool between_members_ = false;  // a member ended; the next bytes decide whether another starts
  int trailer_left_ = 0;          // raw mode: bytes of the ended member's trailer still to skip
  bool at_boundary_ = true;
  bool eof_ = false;
  int64_t out_ = 0;                   // uncompressed offset of the next byte returned
  int64_t file_pos_ = 0;              // offset in the file of input_'s end
  std::vector<unsigned char> input_;  // gzip: zs_.next_in / avail_in point into it
  std::string history_;               // the last >= 32 KiB returned (gzip read from the start)
  bool keep_window_ = false;
};

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_TEXT_STREAM_H_
