// ProgressJournal: where the coordinator keeps its progress (examples, evaluations, worker ids,
// shard modes, the lease table) so a restarted coordinator carries on the same job.
//
// FileProgressJournal keeps it in <dir>/coordinator.state, framed and checksummed like a
// checkpoint and replaced atomically (write, fsync, rename); InMemoryProgressJournal is the fake
// for tests and the simulator, with the same contract.
// Thread-safety: both implementations are thread-safe.
#ifndef SYNCOPATE_LIBS_COORDINATOR_PROGRESS_JOURNAL_H_
#define SYNCOPATE_LIBS_COORDINATOR_PROGRESS_JOURNAL_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::coordinator {

class ProgressJournal {
 public:
  virtual ~ProgressJournal() = default;
  // The progress saved last. NOT_FOUND when nothing was ever saved; DATA_LOSS when what is there
  // cannot be read (torn, corrupt, or not a progress record).
  virtual absl::StatusOr<v1::CoordinatorProgress> Load() = 0;
  // Replaces the saved progress; returns once the new record would survive a crash.
  virtual absl::Status Save(const v1::CoordinatorProgress& progress) = 0;
};

class FileProgressJournal final : public ProgressJournal {
 public:
  // The directory is created on the first Save.
  explicit FileProgressJournal(std::string dir);

  absl::StatusOr<v1::CoordinatorProgress> Load() override;
  absl::Status Save(const v1::CoordinatorProgress& progress) override;

  // <dir>/coordinator.state
  const std::string& path() const { return path_; }

 private:
  const std::string dir_;
  const std::string path_;
  absl::Mutex mu_;  // one writer at a time: two writers would share the temporary file
};

class InMemoryProgressJournal final : public ProgressJournal {
 public:
  absl::StatusOr<v1::CoordinatorProgress> Load() override;
  absl::Status Save(const v1::CoordinatorProgress& progress) override;

  // How many times Save was called.
  int saves() const;

 private:
  mutable absl::Mutex mu_;
  std::optional<v1::CoordinatorProgress> saved_ ABSL_GUARDED_BY(mu_);
  int saves_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_PROGRESS_JOURNAL_H_
