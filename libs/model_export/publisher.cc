#include "libs/model_export/publisher.h"

#include <signal.h>  // NOLINT(modernize-deprecated-headers): kill is POSIX
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "libs/common/status_macros.h"

namespace syncopate::model_export {
namespace {

namespace fs = std::filesystem;

// "<6-digit sequence>-<source>-v<version>": the sequence orders versions, the rest says what
// each holds.
bool VersionSequence(const std::string& name, int64_t* sequence) {
  int consumed = 0;
  return std::sscanf(name.c_str(), "%6" SCNd64 "-%n", sequence, &consumed) == 1 && consumed == 7;
}

// A process id that still runs (kill 0 says so without signalling).
bool Alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

// Hidden partial versions and symlinks of publishers that died (a kill -9 mid-export).
void RemoveStale(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // ".<version>.partial-<pid>" (ExportTo's) and ".current.<pid>" (a link not yet renamed).
    if (name.empty() || name[0] != '.') continue;
    if (name.find(".partial-") == std::string::npos && name.find(".current.") != 0) continue;
    const size_t at = name.find_last_of(".-");
    pid_t pid = 0;
    if (std::sscanf(name.c_str() + at + 1, "%d", &pid) != 1 || Alive(pid)) continue;
    fs::remove_all(entry.path(), error);
  }
}

struct Version {
  int64_t sequence;
  std::string name;
};

std::vector<Version> ListVersions(const std::string& dir) {
  std::vector<Version> versions;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    int64_t sequence = 0;
    if (entry.is_directory() && VersionSequence(name, &sequence)) {
      versions.push_back({sequence, name});
    }
  }
  std::sort(versions.begin(), versions.end(),
            [](const Version& a, const Version& b) { return a.sequence < b.sequence; });
  return versions;
}

}  // namespace

absl::StatusOr<std::string> CurrentVersion(const std::string& dir) {
  std::error_code error;
  const fs::path link = fs::path(dir) / kCurrentLink;
  const fs::path target = fs::read_symlink(link, error);
  if (error) return absl::NotFoundError(absl::StrCat(dir, " has no current version"));
  return (fs::absolute(dir) / target).string();
}

absl::StatusOr<v1::ExportRecord> PublishVersion(const ExportRequest& request,
                                                const PublishOptions& options) {
  if (options.keep < 1) return absl::InvalidArgumentError("keep must be >= 1");
  std::error_code error;
  fs::create_directories(options.dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", options.dir, ": ", error.message()));
  }
  RemoveStale(options.dir);
  SYNCOPATE_ASSIGN_OR_RETURN(const SourceSummary source, SummarizeSource(request.from));
  const std::vector<Version> existing = ListVersions(options.dir);
  const int64_t sequence = existing.empty() ? 1 : existing.back().sequence + 1;
  const std::string name =
      absl::StrFormat("%06d-%s-v%012d", sequence, source.kept ? "kept" : "latest",
                      source.versions.empty() ? 0 : source.versions.back());
  // READY is the last file written before the version is renamed in: a reader that lists the
  // directory instead of following `current` takes only versions that have it.
  const FormatWriter formats = [&options](const std::string& dir,
                                          const v1::ExportManifest& manifest) -> absl::Status {
    if (options.formats) SYNCOPATE_RETURN_IF_ERROR(options.formats(dir, manifest));
    std::ofstream ready(absl::StrCat(dir, "/", kReadyFile));
    ready << "syncopate-export/1\n";
    ready.flush();
    return ready ? absl::OkStatus()
                 : absl::UnavailableError(absl::StrCat("cannot write ", dir, "/", kReadyFile));
  };
  SYNCOPATE_ASSIGN_OR_RETURN(const v1::ExportManifest manifest,
                             ExportTo(request, (fs::path(options.dir) / name).string(), formats));
  // The new `current`: a symlink made beside it, renamed over it (rename replaces atomically).
  const fs::path temporary = fs::path(options.dir) / absl::StrCat(".current.", getpid());
  fs::remove(temporary, error);
  fs::create_directory_symlink(name, temporary, error);
  if (error ||
      std::rename(temporary.c_str(), (fs::path(options.dir) / kCurrentLink).c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot point ", options.dir, "/", kCurrentLink,
                                               " at ", name, ": ", std::strerror(errno)));
  }
  std::vector<Version> versions = ListVersions(options.dir);
  for (size_t i = 0; i + static_cast<size_t>(options.keep) < versions.size(); ++i) {
    if (versions[i].name == name) continue;
    fs::remove_all(fs::path(options.dir) / versions[i].name, error);
  }
  v1::ExportRecord record;
  record.set_path((fs::absolute(options.dir) / name).string());
  record.set_source(manifest.source());
  record.mutable_versions()->CopyFrom(manifest.versions());
  record.set_unix_millis(absl::ToUnixMillis(absl::Now()));
  return record;
}

}  // namespace syncopate::model_export
