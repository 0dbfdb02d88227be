// Which process writes a shard's checkpoints: a fencing claim on the checkpoint directory.
//
// A shard's pod on a lost node (frozen, or cut off) is replaced while its process still exists;
// when the node comes back, that stale process resumes where it stopped, with parameters older
// than its replacement's, and may still write a checkpoint (a command it had read but not yet
// obeyed). Its file would then be the newest on disk (its version can be higher than the
// replacement's, which restored an older checkpoint) and would prune the replacement's files.
// So a shard process that adopts its assignment claims the directory (<dir>/shard-<id>.claim: a
// token naming it), and the newest claim wins: a process writes checkpoints only while the file
// names it, checks that before it writes, again just before the file becomes visible and once
// more after (removing its own file if it lost the claim meanwhile), and ends itself as
// superseded when it sees another claim (libs/shard/shard_node.h). The coordinator is the
// arbiter of who claims: it accepts one session per shard id (ALREADY_EXISTS for a second), so a
// process claims only after the previous one's session was declared gone.
// What this does not cover: a file system without atomic rename or coherent reads (the claim is
// a small file replaced by rename), and a process frozen in the microseconds between its last
// check and its rename (docs/operations.md, "When a node is lost").
// Thread-safety: a ShardClaim is immutable after Take; Check may be called from any thread.
#ifndef SYNCOPATE_LIBS_CHECKPOINT_SHARD_CLAIM_H_
#define SYNCOPATE_LIBS_CHECKPOINT_SHARD_CLAIM_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::checkpoint {

class ShardClaim {
 public:
  // Claims `dir` for shard `shard_id`, replacing whatever claim was there. `holder` names this
  // process in the messages of the one it supersedes (host name and process id, say); a random
  // part makes every claim distinct. UNAVAILABLE when the file cannot be written.
  static absl::StatusOr<ShardClaim> Take(const std::string& dir, int shard_id,
                                         const std::string& holder);

  // OK while the claim file is this claim's. FAILED_PRECONDITION when another process claimed
  // the directory since, or the file is gone or unreadable as a claim (fail closed): this
  // process is superseded and must write nothing more. UNAVAILABLE only for an I/O error that
  // says nothing about the claim (e.g. the directory cannot be read at all).
  absl::Status Check() const;

  // Whether `status` (from Check, or a Save given this claim) says the claim is lost.
  static bool IsSuperseded(const absl::Status& status) {
    return status.code() == absl::StatusCode::kFailedPrecondition;
  }

  const std::string& path() const { return path_; }
  const std::string& token() const { return token_; }

 private:
  ShardClaim(std::string path, std::string token)
      : path_(std::move(path)), token_(std::move(token)) {}

  std::string path_;
  std::string token_;
};

}  // namespace syncopate::checkpoint

#endif  // SYNCOPATE_LIBS_CHECKPOINT_SHARD_CLAIM_H_
