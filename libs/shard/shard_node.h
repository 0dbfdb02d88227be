// The shard process's side of the coordinator session: builds the ShardCore from the
// assignment (restoring a checkpoint when there is one), follows membership / mode / checkpoint
// / stop commands, and reports twice a second. With a checkpoint directory it claims it when it
// adopts its assignment (checkpoint/shard_claim.h) and checks the claim before every checkpoint
// and every report: a process whose claim another took ends its session as kSuperseded.
// Thread-safety: RunSession runs on one thread; commands arrive on the session's reader thread;
// RequestStop may be called from any thread.
#ifndef SYNCOPATE_LIBS_SHARD_SHARD_NODE_H_
#define SYNCOPATE_LIBS_SHARD_SHARD_NODE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/checkpoint/shard_claim.h"
#include "libs/common/clock.h"
#include "libs/shard/train_service.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::shard {

// The subdirectory of checkpoint_dir that holds the version the job keeps (ADR 0017).
inline constexpr const char* kKeptDir = checkpoint::kKeptDir;

struct ShardNodeOptions {
  int shard_id = 0;
  std::string address;  // what workers dial
  // Write here; restore from here after a crash ("" = off). The version the job keeps (a
  // validation set's best evaluation point, ADR 0017) goes to its kKeptDir subdirectory.
  std::string checkpoint_dir;
  std::string restore_dir;  // else restore from here (another run's checkpoints; "" = none)
  int64_t max_push_bytes = kMaxPushBytes;  // pushes above this are rejected as "oversize"
  Clock* clock = Clock::Real();            // the ShardCore's
};

class ShardNode {
 public:
  ShardNode(ShardNodeOptions options, TrainService& train, ShardMetrics& metrics)
      : options_(std::move(options)), train_(train), metrics_(metrics) {}

  // kSuperseded: another process of this shard claimed the checkpoint directory (a replacement
  // started while this one was frozen or cut off: checkpoint/shard_claim.h); this one must stop
  // at once and write nothing more.
  enum class SessionEnd { kJobDone, kLost, kFatal, kSuperseded };
  // One coordinator session, until it ends, the job is done, or RequestStop.
  // `reached` says whether the coordinator answered at all (for the caller's backoff).
  SessionEnd RunSession(v1::Coordinator::Stub& stub, bool& reached);
  const std::string& fatal_error() const { return fatal_error_; }
  // Ends the current session within half a second, and makes later ones end at once.
  void RequestStop() { stop_.Notify(); }

 private:
  void OnCommand(v1::CoordinatorToShard& message);
  absl::Status Adopt(const v1::ShardAssignment& assignment);
  void Checkpoint(const char* why, bool final_is_kept = false);
  // The claim of this process, null without a checkpoint directory or before the assignment.
  std::shared_ptr<const checkpoint::ShardClaim> claim();
  // Records why this process is superseded; the session then ends as kSuperseded.
  void Superseded(const absl::Status& why);

  const ShardNodeOptions options_;
  TrainService& train_;
  ShardMetrics& metrics_;
  std::string fatal_error_;
  absl::Notification stop_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool reached_ ABSL_GUARDED_BY(mu_) = false;
  std::string error_ ABSL_GUARDED_BY(mu_);
  bool superseded_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const checkpoint::ShardClaim> claim_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_SHARD_NODE_H_
