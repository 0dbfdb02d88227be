#include "libs/checkpoint/shard_restore.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/embedding/owner_shard.h"
#include "libs/tensor/packed.h"

namespace syncopate::checkpoint {
namespace {

// A source's dense slices must be self-consistent before anything is sized from them.
absl::Status CheckSlices(const v1::ShardCheckpoint& source, bool with_state) {
  for (const v1::CheckpointSlice& from : source.slices()) {
    const uint64_t bytes = static_cast<uint64_t>(from.length()) * sizeof(float);
    bool sound = from.length() >= 0 && from.tensor_offset() >= 0 &&
                 from.tensor_offset() <= INT64_MAX - from.length() && from.values().size() == bytes;
    for (const std::string& vector : from.optimizer_state()) {
      sound = sound && (!with_state || vector.size() == bytes);
    }
    if (!sound) {
      return absl::DataLossError(absl::StrCat("checkpoint slice of ", from.tensor(),
                                              " is inconsistent (length ", from.length(), ", ",
                                              from.values().size(), " value bytes)"));
    }
  }
  return absl::OkStatus();
}

// Copies the source's dense values and optimizer state that fall in the target's slices.
// `covered` marks the elements written so far: each must be written exactly once.
absl::Status RestoreDense(const v1::ShardCheckpoint& source, const v1::ShardPartition& partition,
                          bool parameters_only, RestoredShard& out, std::vector<bool>& covered) {
  std::vector<float> values;
  for (const v1::CheckpointSlice& from : source.slices()) {
    if (!parameters_only &&
        static_cast<size_t>(from.optimizer_state_size()) != out.optimizer_state.size()) {
      return absl::FailedPreconditionError("checkpoint optimizer state has the wrong shape");
    }
    for (const v1::TensorSlice& to : partition.slices()) {
      if (to.tensor() != from.tensor()) continue;
      // The overlap of [from.offset, +from.length) and [to.offset, +to.length) in the tensor.
      const int64_t begin = std::max(from.tensor_offset(), to.tensor_offset());
      const int64_t end =
          std::min(from.tensor_offset() + from.length(), to.tensor_offset() + to.length());
      if (begin >= end) continue;
      const int64_t dst = to.flat_offset() - partition.flat_begin() + (begin - to.tensor_offset());
      const int64_t src = begin - from.tensor_offset();
      for (int64_t i = dst; i < dst + (end - begin); ++i) {
        if (covered[static_cast<size_t>(i)]) {
          return absl::FailedPreconditionError(
              absl::StrCat("checkpoints cover flat offset ", partition.flat_begin() + i,
                           " of shard ", partition.shard_id(), " twice"));
        }
        covered[static_cast<size_t>(i)] = true;
      }
      values.resize(static_cast<size_t>(from.length()));
      SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(from.values(), values));
      std::copy_n(values.begin() + src, end - begin, out.parameters.begin() + dst);
      if (parameters_only) continue;
      for (size_t k = 0; k < out.optimizer_state.size(); ++k) {
        SYNCOPATE_RETURN_IF_ERROR(
            tensor::UnpackFloatsInto(from.optimizer_state(static_cast<int>(k)), values));
        std::copy_n(values.begin() + src, end - begin, out.optimizer_state[k].begin() + dst);
      }
    }
  }
  return absl::OkStatus();
}

// What a job of the old layout needs, for a tensor only that layout has or shapes differently.
std::string LayoutHint(const std::string& tensor) {
  if (tensor == "fm/numeric") {
    return " (a DeepFM checkpoint from before model.fm_fields needs CATEGORICAL_AND_NUMERIC)";
  }
  if (absl::StartsWith(tensor, "cross")) {
    return " (a DCN checkpoint from before model.cross_fields needs CATEGORICAL_AND_NUMERIC)";
  }
  return "";
}

// A checkpoint whose dense tensors the job's model lacks, or holds in another size, was written
// for another layout: restoring the rest would silently drop those tensors' part of the model (a
// DeepFM checkpoint from before ADR 0020 holds "fm/numeric", which the default FM no longer
// has), and a tensor of another size would be copied element by element into the wrong places (a
// DCN checkpoint from before ADR 0021 has wider cross layers). Checked against the job's layout
// record when the coordinator filled it in; a slice must lie inside its tensor.
absl::Status CheckTensorsKnown(const v1::ShardCheckpoint& source, const v1::JobSpec& job) {
  const v1::ModelLayoutRecord& layout = job.model().layout();
  if (layout.dense_size() == 0) return absl::OkStatus();
  for (const v1::CheckpointSlice& slice : source.slices()) {
    const auto tensor = std::find_if(
        layout.dense().begin(), layout.dense().end(),
        [&slice](const v1::TensorShape& shape) { return shape.name() == slice.tensor(); });
    if (tensor == layout.dense().end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint holds tensor '", slice.tensor(),
          "', which the job's model does not have: it was written for another model layout",
          LayoutHint(slice.tensor())));
    }
    int64_t elements = 1;
    for (const int64_t dim : tensor->shape()) elements *= dim;
    if (slice.tensor_offset() + slice.length() > elements) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint holds tensor '", slice.tensor(), "' with more than the ", elements,
          " elements the job's model gives it: it was written for another model layout",
          LayoutHint(slice.tensor())));
    }
  }
  return absl::OkStatus();
}

// Sets the source's embedding rows that the target shard owns into the fresh tables, with their
// idle time, and merges the source's admission sketch into the table's (ADR 0010).
absl::Status RestoreRows(const v1::ShardCheckpoint& source, const RestoreTarget& target,
                         RestoredShard& out) {
  const v1::ShardAssignment& assignment = *target.assignment;
  const size_t slots = static_cast<size_t>(target.row_rule->num_slots());
  const bool parameters_only = target.parameters_only;
  const int32_t shard_id = assignment.partition().shard_id();
  const int32_t num_shards = assignment.job().num_shards();
  // Under the same shard count a shard's keys all come from its namesake; under another, from
  // any source.
  const bool merge_sketch =
      !parameters_only && (source.num_shards() != num_shards || source.shard_id() == shard_id);
  const uint64_t source_steps =
      static_cast<uint64_t>(std::max<int64_t>(0, source.optimizer_steps()));
  std::vector<uint64_t> keys, last_touched;
  std::vector<float> row_values, row_state;
  std::vector<std::vector<float>> slot_values(slots);
  for (const v1::EmbeddingSlice& from : source.embeddings()) {
    auto it = std::find_if(out.tables.begin(), out.tables.end(),
                           [&](const auto& t) { return t->spec().name() == from.table(); });
    if (it == out.tables.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint has embedding table '", from.table(), "' the job lacks"));
    }
    embedding::EmbeddingTable& table = **it;
    const size_t dim = static_cast<size_t>(table.dim());
    if (from.dim() != table.dim()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint table '", from.table(), "' has width ", from.dim(), ", not ", table.dim()));
    }
    SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackKeys(from.keys(), keys));
    const uint64_t bytes = static_cast<uint64_t>(keys.size()) * dim * sizeof(float);
    // A warm start reads the values alone (a kept version or an export has no optimizer state).
    const size_t from_slots = parameters_only ? 0 : slots;
    bool sound = from.values().size() == bytes &&
                 (parameters_only || static_cast<size_t>(from.optimizer_state_size()) == slots);
    for (const std::string& vector : from.optimizer_state()) {
      sound = sound && vector.size() == bytes;
    }
    sound = sound && (from.last_touched().empty() ||
                      from.last_touched().size() == keys.size() * sizeof(uint64_t));
    if (!sound) {
      return absl::DataLossError(absl::StrCat("checkpoint rows of table '", from.table(),
                                              "' are inconsistent with their ", keys.size(),
                                              " keys"));
    }
    if (table.admits() && from.has_admission() && merge_sketch) {
      // The element-wise maximum never undercounts a key (AdmissionSketch says why).
      SYNCOPATE_RETURN_IF_ERROR(table.mutable_admission()->MergeMax(from.admission()));
    }
    last_touched.clear();
    if (!parameters_only && !from.last_touched().empty()) {
      SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackKeys(from.last_touched(), last_touched));
    }
    row_values.resize(keys.size() * dim);
    SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(from.values(), row_values));
    for (size_t k = 0; k < from_slots; ++k) {
      slot_values[k].resize(keys.size() * dim);
      SYNCOPATE_RETURN_IF_ERROR(
          tensor::UnpackFloatsInto(from.optimizer_state(static_cast<int>(k)), slot_values[k]));
    }
    for (size_t k = from_slots; k < slots; ++k) {
      // Fresh slots (a warm start): what a new row of the rule starts with.
      slot_values[k].assign(keys.size() * dim,
                            target.row_rule->slot_initial_value(static_cast<int>(k)));
    }
    row_state.resize(slots * dim);
    for (size_t r = 0; r < keys.size(); ++r) {
      if (embedding::OwnerShard(keys[r], num_shards) != shard_id) continue;
      for (size_t k = 0; k < slots; ++k) {
        std::copy_n(slot_values[k].begin() + static_cast<std::ptrdiff_t>(r * dim), dim,
                    row_state.begin() + static_cast<std::ptrdiff_t>(k * dim));
      }
      // A row keeps its idle time (source updates since its last touch; shards count updates
      // separately in gba) on the restored shard's clock; rows of a table that did not evict
      // count as touched at the restore.
      // (Unsigned: a crafted file's steps cannot overflow; idle <= source steps <= the restored.)
      int64_t idle = 0;
      if (!last_touched.empty() && last_touched[r] < source_steps) {
        idle = static_cast<int64_t>(source_steps - last_touched[r]);
      }
      table.Set(keys[r], std::span<const float>(row_values).subspan(r * dim, dim), row_state,
                out.optimizer_steps - idle);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RestoredShard> RestoreShard(const RestoreTarget& target,
                                           const std::vector<v1::ShardCheckpoint>& sources) {
  if (target.assignment == nullptr || target.row_rule == nullptr || target.optimizer_vectors < 0) {
    return absl::InvalidArgumentError("restore target needs an assignment and a row rule");
  }
  const v1::ShardAssignment& assignment = *target.assignment;
  const v1::ShardPartition& partition = assignment.partition();
  const int64_t size = partition.flat_end() - partition.flat_begin();
  if (size < 0) return absl::InvalidArgumentError("the shard's range is negative");
  RestoredShard out;
  out.parameters.assign(static_cast<size_t>(size), 0.0f);
  out.optimizer_state.assign(static_cast<size_t>(target.optimizer_vectors),
                             std::vector<float>(static_cast<size_t>(size), 0.0f));
  std::vector<bool> covered(static_cast<size_t>(size), false);
  if (target.parameters_only) {
    // Fresh optimizer state: every slot at the rule's initial value, as a new optimizer has it.
    for (size_t k = 0; k < out.optimizer_state.size(); ++k) {
      const int slot = static_cast<int>(k);
      std::fill(
          out.optimizer_state[k].begin(), out.optimizer_state[k].end(),
          slot < target.row_rule->num_slots() ? target.row_rule->slot_initial_value(slot) : 0.0f);
    }
  }
  for (const v1::ShardCheckpoint& source : sources) {
    SYNCOPATE_RETURN_IF_ERROR(CheckTensorsKnown(source, assignment.job()));
    if (target.parameters_only) {
      SYNCOPATE_RETURN_IF_ERROR(CheckSlices(source, /*with_state=*/false));
      SYNCOPATE_RETURN_IF_ERROR(RestoreDense(source, partition, true, out, covered));
      continue;
    }
    if (source.job_id() != assignment.job().job_id()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint of job '", source.job_id(),
                                                        "' cannot restore job '",
                                                        assignment.job().job_id(), "'"));
    }
    if (source.optimizer() != target.optimizer) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint optimizer ", source.optimizer(),
                                                        " differs from ", target.optimizer));
    }
    out.version = std::max(out.version, source.version());
    out.optimizer_steps = std::max(out.optimizer_steps, source.optimizer_steps());
    out.schedule_progress = std::max(out.schedule_progress, source.schedule_progress());
    SYNCOPATE_RETURN_IF_ERROR(CheckSlices(source, /*with_state=*/true));
    SYNCOPATE_RETURN_IF_ERROR(RestoreDense(source, partition, false, out, covered));
  }
  const int64_t filled = std::count(covered.begin(), covered.end(), true);
  if (filled != size) {
    // Missing shard files, or files of a model whose dense layout differs from the job's (a
    // changed model spec; CTR jobs from before ADR 0016 need numeric_missing: MISSING_AS_ZERO).
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoints cover ", filled, " of the ", size, " parameters of shard ",
        partition.shard_id(),
        ": a shard's file is missing, or they were written for another model layout (a CTR "
        "checkpoint from before model.numeric_missing needs MISSING_AS_ZERO)"));
  }
  for (const v1::EmbeddingTableSpec& spec : partition.tables()) {
    SYNCOPATE_ASSIGN_OR_RETURN(auto table, embedding::EmbeddingTable::Create(
                                               spec, assignment.job().seed(), target.row_rule));
    table->set_step(out.optimizer_steps);
    out.tables.push_back(std::move(table));
  }
  for (const v1::ShardCheckpoint& source : sources) {
    SYNCOPATE_RETURN_IF_ERROR(RestoreRows(source, target, out));
  }
  return out;
}

}  // namespace syncopate::checkpoint
