#include <memory>
#include <utility>

#include "libs/shard/shard_core.h"
#include "libs/sim/simulation_impl.h"

namespace syncopate::sim::internal {

void Simulation::AssignShard(size_t shard, const v1::ShardAssignment& assignment) {
  if (shard == 0) job_ = assignment.job();
  partitions_[shard] = assignment.partition();
  absl::StatusOr<std::unique_ptr<shard::ShardCore>> core =
      shard::ShardCore::Create(assignment, &clock_, nullptr);
  if (!core.ok()) return Fail(core.status());
  shards_[shard] = std::move(*core);
}

void Simulation::OnShardCommand(size_t shard, const v1::CoordinatorToShard& command) {
  switch (command.kind_case()) {
    case v1::CoordinatorToShard::kMembership:
      shards_[shard]->SetMembership(command.membership());
      return;
    case v1::CoordinatorToShard::kSetMode:
      if (absl::Status applied = shards_[shard]->ApplyModeCommand(command.set_mode());
          !applied.ok()) {
        Fail(applied);
      }
      return;
    case v1::CoordinatorToShard::kStop:
      // As ShardNode: the last report, marked final, and no more.
      shard_stopped_[shard] = true;
      SendShardReport(shard, /*final=*/true);
      return;
    default:  // checkpoints are not simulated
      return;
  }
}

void Simulation::SendShardReport(size_t shard, bool final) {
  v1::ShardReport report = shard::ReportOf(shards_[shard]->Stats());
  report.set_final(final);
  const int64_t bytes = static_cast<int64_t>(report.ByteSizeLong());
  Send(ShardThread(shard), bytes, [this, shard, report = std::move(report)] {
    coordinator_->ShardReport(static_cast<int32_t>(shard), report);
  });
}

void Simulation::ScheduleShardReport(size_t shard) {
  queue_.After(shard::kReportInterval, [this, shard] {
    if (shard_stopped_[shard] || Done()) return;
    SendShardReport(shard, /*final=*/false);
    ScheduleShardReport(shard);
  });
}

}  // namespace syncopate::sim::internal
