#include "libs/checkpoint/shard_claim.h"

#include <filesystem>
#include <random>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "libs/checkpoint/checkpoint_store.h"

namespace syncopate::checkpoint {

absl::StatusOr<ShardClaim> ShardClaim::Take(const std::string& dir, int shard_id,
                                            const std::string& holder) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) ^ random();
  std::string token = absl::StrFormat("%s #%016x", holder, nonce);
  std::string path = absl::StrFormat("%s/shard-%d.claim", dir, shard_id);
  absl::Status written = WriteFramedFile(path, token);
  if (!written.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot claim ", dir, " for shard ", shard_id, ": ", written.message()));
  }
  return ShardClaim(std::move(path), std::move(token));
}

absl::Status ShardClaim::Check() const {
  absl::StatusOr<std::string> current = ReadFramedFile(path_);
  if (current.ok() && *current == token_) return absl::OkStatus();
  if (current.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("superseded: ", path_, " names another process of this shard (", *current,
                     "; this one is ", token_,
                     "): it took over, e.g. after this node was lost, and this process must not "
                     "write checkpoints any more"));
  }
  std::error_code error;
  const bool dir_readable =
      std::filesystem::is_directory(std::filesystem::path(path_).parent_path(), error);
  if (!dir_readable) {
    return absl::UnavailableError(
        absl::StrCat("cannot read the claim ", path_, ": ", current.status().message()));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("superseded: this process's claim ", path_, " is gone or unreadable (",
                   current.status().message(), "); it must not write checkpoints any more"));
}

}  // namespace syncopate::checkpoint
