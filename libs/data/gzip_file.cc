#include "libs/data/gzip_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace syncopate::data {

absl::Status OpenFileError(int errnum, absl::string_view what, const std::string& path) {
  std::string message = absl::StrCat("cannot open ", what, " '", path,
                                     "': ", errnum != 0 ? std::strerror(errnum) : "out of memory");
  switch (errnum) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnknownError(message);
  }
}

absl::StatusOr<GzFile> OpenGzFile(const std::string& path, const char* mode,
                                  absl::string_view what) {
  errno = 0;
  gzFile raw = gzopen(path.c_str(), mode);
  if (raw != nullptr) return GzFile(raw);
  // gzopen leaves errno at 0 when its own allocation failed.
  return OpenFileError(errno, what, path);
}

absl::StatusOr<int> GzReadSome(gzFile_s* file, char* buffer, unsigned size, const std::string& path,
                               absl::string_view what) {
  const int got = gzread(file, buffer, size);
  if (got > 0) return got;
  int error = Z_OK;
  const char* message = gzerror(file, &error);
  switch (error) {
    case Z_OK:
      return 0;
    case Z_ERRNO:
      return absl::UnknownError(
          absl::StrCat("cannot read ", what, " '", path, "': ", std::strerror(errno)));
    case Z_BUF_ERROR:
      // zlib's code for input that stops inside a gzip member.
      return absl::DataLossError(
          absl::StrCat(what, " '", path, "' is truncated: the gzip stream ends early"));
    default:
      return absl::DataLossError(absl::StrCat(what, " '", path, "' is corrupt: ", message));
  }
}

absl::Status GzCloseChecked(GzFile file, const std::string& path, absl::string_view what) {
  errno = 0;
  const int result = gzclose(file.release());
  if (result == Z_OK) return absl::OkStatus();
  return absl::UnknownError(absl::StrCat(
      "cannot write ", what, " '", path,
      "': ", result == Z_ERRNO && errno != 0 ? std::strerror(errno) : "zlib error on close"));
}

}  // namespace syncopate::data
