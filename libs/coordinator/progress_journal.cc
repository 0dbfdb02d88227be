#include "libs/coordinator/progress_journal.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/status_macros.h"

namespace syncopate::coordinator {

FileProgressJournal::FileProgressJournal(std::string dir)
    : dir_(std::move(dir)), path_(dir_ + "/coordinator.state") {}

absl::StatusOr<v1::CoordinatorProgress> FileProgressJournal::Load() {
  absl::MutexLock lock(&mu_);
  SYNCOPATE_ASSIGN_OR_RETURN(std::string payload, checkpoint::ReadFramedFile(path_));
  v1::CoordinatorProgress progress;
  if (!progress.ParseFromString(payload)) {
    return absl::DataLossError(path_ + " does not parse as coordinator progress");
  }
  return progress;
}

absl::Status FileProgressJournal::Save(const v1::CoordinatorProgress& progress) {
  absl::MutexLock lock(&mu_);
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  return checkpoint::WriteFramedFile(path_, progress.SerializeAsString());
}

absl::StatusOr<v1::CoordinatorProgress> InMemoryProgressJournal::Load() {
  absl::MutexLock lock(&mu_);
  if (!saved_.has_value()) return absl::NotFoundError("no progress saved");
  return *saved_;
}

absl::Status InMemoryProgressJournal::Save(const v1::CoordinatorProgress& progress) {
  absl::MutexLock lock(&mu_);
  saved_ = progress;
  ++saves_;
  return absl::OkStatus();
}

int InMemoryProgressJournal::saves() const {
  absl::MutexLock lock(&mu_);
  return saves_;
}

}  // namespace syncopate::coordinator
