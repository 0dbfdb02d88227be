#include "libs/shard/shard_node.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "libs/common/clock.h"
#include "libs/common/status_macros.h"
#include "libs/model_export/export_reader.h"
#include "libs/rpc/client_stream.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::shard {
namespace {

// The parameters of a checkpoint as a kept version of the job's end (no optimizer state, never
// restored as a training state: ADR 0017).
v1::ShardCheckpoint FinalPoint(const v1::ShardCheckpoint& snapshot) {
  v1::ShardCheckpoint kept = snapshot;
  kept.set_optimizer(checkpoint::kParametersOnly);
  kept.set_final_point(true);
  for (v1::CheckpointSlice& slice : *kept.mutable_slices()) slice.clear_optimizer_state();
  for (v1::EmbeddingSlice& table : *kept.mutable_embeddings()) {
    table.clear_optimizer_state();
    table.clear_last_touched();
    table.clear_admission();
  }
  return kept;
}

}  // namespace

std::shared_ptr<const checkpoint::ShardClaim> ShardNode::claim() {
  absl::MutexLock lock(&mu_);
  return claim_;
}

void ShardNode::Superseded(const absl::Status& why) {
  LOG(ERROR) << "shard " << options_.shard_id << " stops: " << why.message();
  absl::MutexLock lock(&mu_);
  superseded_ = true;
  if (error_.empty()) error_ = std::string(why.message());
}

absl::Status ShardNode::Adopt(const v1::ShardAssignment& assignment) {
  absl::StatusOr<std::unique_ptr<ShardCore>> core =
      ShardCore::Create(assignment, options_.clock, &metrics_, options_.max_push_bytes);
  if (!core.ok()) return core.status();
  if (!options_.checkpoint_dir.empty()) {
    // The coordinator accepted this process as the shard (it holds one session per shard id), so
    // it is now the one that writes the shard's checkpoints: a process this one replaces, if it
    // comes back, finds the directory claimed and stops (checkpoint/shard_claim.h).
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    absl::StatusOr<checkpoint::ShardClaim> claim = checkpoint::ShardClaim::Take(
        options_.checkpoint_dir, options_.shard_id,
        absl::StrCat(host, " pid ", getpid(), " at ",
                     absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())));
    if (!claim.ok()) return claim.status();
    absl::MutexLock lock(&mu_);
    claim_ = std::make_shared<const checkpoint::ShardClaim>(*std::move(claim));
  }
  const int num_shards = assignment.job().num_shards();
  // After a crash, our own latest checkpoint; for a new run resuming an old one, the old run's
  // checkpoints, from the same layout or re-partitioned from any complete layout.
  std::vector<std::string> refused;
  std::vector<v1::ShardCheckpoint> sources;
  if (!options_.checkpoint_dir.empty()) {
    auto own = checkpoint::CheckpointStore(options_.checkpoint_dir)
                   .LoadLatest(options_.shard_id, num_shards, &refused);
    if (own.ok()) sources.push_back(*std::move(own));
  }
  if (sources.empty() && !options_.restore_dir.empty()) {
    checkpoint::CheckpointStore store(options_.restore_dir);
    auto same = store.LoadLatest(options_.shard_id, num_shards, &refused);
    if (same.ok()) {
      sources.push_back(*std::move(same));
    } else {
      auto layout = store.LoadLatestLayout(&refused);
      if (!layout.ok()) return layout.status();
      sources = *std::move(layout);
    }
  }
  for (const std::string& why : refused) LOG(ERROR) << "refused checkpoint: " << why;
  const std::string& warm_start = assignment.job().model().warm_start().from();
  if (sources.empty() && !warm_start.empty()) {
    // A new job from a trained model: its parameters only (restoring our own checkpoint after a
    // crash, above, takes precedence: it is this job's own progress).
    absl::StatusOr<std::vector<v1::ShardCheckpoint>> warm =
        model_export::LoadParameters(warm_start);
    if (!warm.ok()) return warm.status();
    SYNCOPATE_RETURN_IF_ERROR((*core)->WarmStart(*warm));
    LOG(INFO) << "shard " << options_.shard_id << " warm-started from " << warm_start;
  }
  if (!sources.empty()) {
    absl::Status restored = (*core)->Restore(sources);
    if (!restored.ok()) return restored;
    LOG(INFO) << "shard " << options_.shard_id << " restored version " << (*core)->Stats().version
              << " from " << sources.size() << " checkpoint(s) taken with "
              << sources.front().num_shards() << " shard(s)";
  }
  LOG(INFO) << "shard " << options_.shard_id << " assigned [" << (*core)->flat_begin() << ", "
            << (*core)->flat_end() << ") in mode " << ModeName(assignment.mode());
  train_.SetCore(std::move(*core));
  return absl::OkStatus();
}

void ShardNode::Checkpoint(const char* why, bool final_is_kept) {
  std::shared_ptr<ShardCore> core = train_.core();
  if (options_.checkpoint_dir.empty() || core == nullptr) return;
  const v1::ShardCheckpoint snapshot = core->Snapshot();
  const std::shared_ptr<const checkpoint::ShardClaim> held = claim();
  absl::Status saved =
      checkpoint::CheckpointStore(options_.checkpoint_dir).Save(snapshot, held.get());
  if (checkpoint::ShardClaim::IsSuperseded(saved)) {
    Superseded(saved);
    return;
  }
  if (!saved.ok()) {
    LOG(ERROR) << "checkpoint (" << why << ") failed: " << saved;
    return;
  }
  LOG(INFO) << "checkpoint (" << why << ") at version " << snapshot.version();
  // The version the job keeps (ADR 0017): the evaluation point the evaluator released since, or
  // at the end, when the job keeps its final evaluation, the parameters it ends with.
  std::shared_ptr<const v1::ShardCheckpoint> kept = core->TakeKeptPoint();
  if (final_is_kept) kept = std::make_shared<const v1::ShardCheckpoint>(FinalPoint(snapshot));
  if (kept == nullptr) return;
  const std::string dir = options_.checkpoint_dir + "/" + kKeptDir;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (absl::Status written = checkpoint::CheckpointStore(dir).Save(*kept, held.get());
      checkpoint::ShardClaim::IsSuperseded(written)) {
    Superseded(written);
  } else if (!written.ok()) {
    LOG(ERROR) << "kept version (" << why << ") not written: " << written;
  } else if (kept->final_point()) {
    LOG(INFO) << "kept version written: the final parameters at version " << kept->version();
  } else {
    LOG(INFO) << "kept version written: the evaluation point at version " << kept->version();
  }
}

void ShardNode::OnCommand(v1::CoordinatorToShard& message) {
  switch (message.kind_case()) {
    case v1::CoordinatorToShard::kAssignment: {
      {
        absl::MutexLock lock(&mu_);
        reached_ = true;
      }
      if (auto existing = train_.core()) {
        // A coordinator restart: keep our state, adopt the membership and the mode.
        existing->ResetMembership(message.assignment().membership());
        existing->SetMode(message.assignment().mode());
        return;
      }
      absl::Status adopted = Adopt(message.assignment());
      if (!adopted.ok()) {
        absl::MutexLock lock(&mu_);
        error_ = std::string(adopted.message());
      }
      return;
    }
    case v1::CoordinatorToShard::kMembership:
      if (auto core = train_.core()) core->SetMembership(message.membership());
      return;
    case v1::CoordinatorToShard::kSetMode:
      LOG(INFO) << "mode -> " << ModeName(message.set_mode().mode()) << " ("
                << message.set_mode().reason() << ")";
      if (auto core = train_.core()) {
        if (absl::Status applied = core->ApplyModeCommand(message.set_mode()); !applied.ok()) {
          LOG(WARNING) << "mode command: " << applied;
        }
      }
      return;
    case v1::CoordinatorToShard::kCheckpointNow:
      Checkpoint("periodic");
      return;
    case v1::CoordinatorToShard::kStop: {
      LOG(INFO) << "coordinator says stop: " << message.stop().reason();
      Checkpoint("job done", message.stop().final_is_kept());
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      return;
    }
    default:
      return;
  }
}

ShardNode::SessionEnd ShardNode::RunSession(v1::Coordinator::Stub& stub, bool& reached) {
  using Session = rpc::ClientStream<v1::ShardMessage, v1::CoordinatorToShard>;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = false;
    reached_ = false;
  }
  // A process that comes back after its replacement claimed the shard (its node was frozen or
  // cut off) must not register again: the coordinator would take it whenever the replacement's
  // session is down, and it would serve parameters older than the replacement's.
  if (std::shared_ptr<const checkpoint::ShardClaim> held = claim()) {
    if (absl::Status still = held->Check(); checkpoint::ShardClaim::IsSuperseded(still)) {
      Superseded(still);
      fatal_error_ = std::string(still.message());
      return SessionEnd::kSuperseded;
    }
  }
  Session session([&stub](grpc::ClientContext* context) { return stub.ShardSession(context); },
                  [this](v1::CoordinatorToShard& message) { OnCommand(message); }, nullptr);
  v1::ShardMessage hello;
  hello.mutable_hello()->set_shard_id(options_.shard_id);
  hello.mutable_hello()->set_address(options_.address);
  hello.mutable_hello()->set_join_token(train_.join_token());
  // Re-registering with a restarted coordinator: name the job our parameters belong to, so a
  // coordinator running another job refuses us instead of handing us its membership.
  if (std::shared_ptr<ShardCore> core = train_.core()) {
    hello.mutable_hello()->set_job_id(core->job_id());
  }
  session.Write(hello);
  // Report every kReportInterval. The last report (after the coordinator's stop) is marked
  // final so the job's status is exact.
  bool final = false;
  bool superseded = false;
  std::string error;
  while (!final && !session.done()) {
    const bool shutdown = stop_.WaitForNotificationWithTimeout(kReportInterval);
    if (std::shared_ptr<const checkpoint::ShardClaim> held = claim()) {
      // A small file read twice a second: the first report after a thaw finds the claim lost.
      if (absl::Status still = held->Check(); checkpoint::ShardClaim::IsSuperseded(still)) {
        Superseded(still);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      error = error_;
      final = stopped_;
      reached = reached_;
      superseded = superseded_;
    }
    if (!error.empty() || (shutdown && !final)) break;
    std::shared_ptr<ShardCore> core = train_.core();
    if (core == nullptr) continue;
    const ShardStats stats = core->Stats();
    metrics_.SetBarrierWaitingWorkers(static_cast<int64_t>(stats.barrier_waiting_for.size()));
    v1::ShardMessage report;
    v1::ShardReport* r = report.mutable_report();
    *r = ReportOf(stats);
    r->set_final(final);
    for (v1::StalenessBucket& b : metrics_.StalenessHistogram()) {
      *r->add_staleness() = std::move(b);
    }
    *r->mutable_wire() = train_.wire().Totals();
    metrics_.SetWireBytes(r->wire());
    session.Write(report);
  }
  if (!error.empty()) {
    fatal_error_ = error;
    return superseded ? SessionEnd::kSuperseded : SessionEnd::kFatal;
  }
  if (final) {
    session.WritesDone();
    session.WaitForEnd(absl::Seconds(2));
    return SessionEnd::kJobDone;
  }
  if (session.done() && rpc::IsPermanentError(session.status())) {
    // A wrong join token, another job's coordinator or a shard id outside the job is a
    // configuration error: retrying cannot fix it.
    fatal_error_ = "the coordinator refused this shard: " + session.status().error_message();
    return SessionEnd::kFatal;
  }
  if (session.done()) {
    LOG(WARNING) << "coordinator session ended: " << session.status().error_message();
  }
  return SessionEnd::kLost;
}

}  // namespace syncopate::shard
