// zlib file handles shared by the dataset readers and writers: ownership, and open errors as
// absl::Status with the errno mapped to a code. zlib's gzread reads gzip and plain files alike;
// gzopen's "T" mode writes plain files through the same calls.
// Thread-safety: free functions without shared state; one GzFile must not be used from two
// threads at once.
#ifndef SYNCOPATE_LIBS_DATA_GZIP_FILE_H_
#define SYNCOPATE_LIBS_DATA_GZIP_FILE_H_

#include <zlib.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace syncopate::data {

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
// Closes on destruction, ignoring gzclose's result: a writer that must know whether its data
// reached the file calls GzCloseChecked instead.
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// The status for a file that could not be opened, from its errno: "cannot open <what> '<path>':
// <reason>" with NOT_FOUND (ENOENT, ENOTDIR), PERMISSION_DENIED (EACCES, EPERM) or UNKNOWN; errno
// 0 (zlib's own allocation failed) reads "out of memory".
absl::Status OpenFileError(int errnum, absl::string_view what, const std::string& path);

// gzopen(path, mode). Errors name `what` and the path ("cannot open <what> '<path>': <reason>"):
//   NOT_FOUND          the file or a directory on the path does not exist.
//   PERMISSION_DENIED  EACCES / EPERM.
//   UNKNOWN            anything else.
absl::StatusOr<GzFile> OpenGzFile(const std::string& path, const char* mode,
                                  absl::string_view what);

// Reads up to `size` bytes (at most INT_MAX). Returns the count read, 0 only at the clean end of
// the data. Errors name `what` and the path:
//   DATA_LOSS  a corrupt gzip stream, or one that ends before its trailer (a cut download).
//   UNKNOWN    the read itself failed (errno).
absl::StatusOr<int> GzReadSome(gzFile_s* file, char* buffer, unsigned size, const std::string& path,
                               absl::string_view what);

// Closes `file` (a writer: flushes the compressor and the file) and reports whether everything
// written reached the file. `path` and `what` name it in the error.
absl::Status GzCloseChecked(GzFile file, const std::string& path, absl::string_view what);

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_GZIP_FILE_H_
