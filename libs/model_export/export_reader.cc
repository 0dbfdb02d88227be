#include "libs/model_export/export_reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/status_macros.h"
#include "libs/model_export/manifest.h"
#include "libs/tensor/initializer.h"
#include "libs/tensor/packed.h"

namespace syncopate::model_export {
namespace {

absl::Status Mismatch(const std::string& dir, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("export ", dir, ": ", why));
}

}  // namespace

absl::StatusOr<ExportedModel> ExportedModel::Open(const std::string& dir) {
  ExportedModel model;
  model.dir_ = dir;
  SYNCOPATE_ASSIGN_OR_RETURN(model.manifest_, ReadManifest(dir));
  SYNCOPATE_ASSIGN_OR_RETURN(model.job_, ReadExportJob(dir));
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<LoadedTensor> dense,
                             ReadSafetensors(absl::StrCat(dir, "/", kDenseFile)));
  if (static_cast<int>(dense.size()) != model.manifest_.dense_size()) {
    return Mismatch(dir, absl::StrCat("the manifest names ", model.manifest_.dense_size(),
                                      " dense tensors, ", kDenseFile, " holds ", dense.size()));
  }
  for (int i = 0; i < model.manifest_.dense_size(); ++i) {
    const v1::ExportTensor& entry = model.manifest_.dense(i);
    const LoadedTensor& tensor = dense[static_cast<size_t>(i)];
    if (tensor.name != entry.name() || !std::equal(tensor.shape.begin(), tensor.shape.end(),
                                                   entry.shape().begin(), entry.shape().end())) {
      return Mismatch(dir, absl::StrCat("dense tensor ", i, " is ", entry.name(),
                                        " in the manifest and ", tensor.name, " in ", kDenseFile));
    }
    model.dense_.insert(model.dense_.end(), tensor.values.begin(), tensor.values.end());
  }
  for (const v1::ExportTable& entry : model.manifest_.tables()) {
    Table table;
    int64_t rows = 0;
    for (const v1::ExportChunk& chunk : entry.chunks()) {
      Chunk loaded;
      loaded.rows_path = absl::StrCat(dir, "/", chunk.rows());
      SYNCOPATE_ASSIGN_OR_RETURN(const NpyHeader keys,
                                 ReadNpyHeader(absl::StrCat(dir, "/", chunk.keys())));
      SYNCOPATE_ASSIGN_OR_RETURN(loaded.rows, ReadNpyHeader(loaded.rows_path));
      if (keys.type != ArrayType::kUint64 || keys.elements() != chunk.count() ||
          loaded.rows.type != ArrayType::kFloat32 ||
          loaded.rows.shape != std::vector<int64_t>{chunk.count(), entry.dim()}) {
        return Mismatch(dir, absl::StrCat("table '", entry.name(), "': ", chunk.keys(), " and ",
                                          chunk.rows(), " do not hold ", chunk.count(),
                                          " keys and rows of width ", entry.dim()));
      }
      loaded.keys.resize(static_cast<size_t>(chunk.count()));
      SYNCOPATE_RETURN_IF_ERROR(
          ReadNpy(absl::StrCat(dir, "/", chunk.keys()), keys, 0, std::span<uint64_t>(loaded.keys)));
      if (!std::is_sorted(loaded.keys.begin(), loaded.keys.end()) ||
          (!table.chunks.empty() && !loaded.keys.empty() && !table.chunks.back().keys.empty() &&
           loaded.keys.front() <= table.chunks.back().keys.back())) {
        return Mismatch(dir, absl::StrCat("table '", entry.name(), "': ", chunk.keys(),
                                          " is not in key order"));
      }
      rows += chunk.count();
      table.chunks.push_back(std::move(loaded));
    }
    if (rows != entry.count()) {
      return Mismatch(dir,
                      absl::StrCat("table '", entry.name(), "' has ", rows,
                                   " rows in its chunks, the manifest counts ", entry.count()));
    }
    model.tables_.push_back(std::move(table));
  }
  return model;
}

absl::Status ExportedModel::LookUp(int table, std::span<const uint64_t> keys,
                                   std::span<float> out) const {
  if (table < 0 || table >= manifest_.tables_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the export has no table ", table));
  }
  const v1::ExportTable& entry = manifest_.tables(table);
  const size_t dim = static_cast<size_t>(entry.dim());
  if (out.size() != keys.size() * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.size(), " values for ", keys.size(), " rows of width ", dim));
  }
  const bool zeros = entry.absent_rows() == "zeros";
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::span<float> row = out.subspan(i * dim, dim);
    bool found = false;
    for (const Chunk& chunk : tables_[static_cast<size_t>(table)].chunks) {
      if (chunk.keys.empty() || keys[i] > chunk.keys.back()) continue;
      const auto it = std::lower_bound(chunk.keys.begin(), chunk.keys.end(), keys[i]);
      if (it != chunk.keys.end() && *it == keys[i]) {
        SYNCOPATE_RETURN_IF_ERROR(ReadNpy(
            chunk.rows_path, chunk.rows,
            static_cast<int64_t>(it - chunk.keys.begin()) * static_cast<int64_t>(dim), row));
        found = true;
      }
      break;
    }
    if (found) continue;
    if (zeros) {
      std::fill(row.begin(), row.end(), 0.0f);
    } else {
      SYNCOPATE_RETURN_IF_ERROR(
          tensor::InitializeRow(entry.initializer(), manifest_.seed(), entry.name(), keys[i], row));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardCheckpoint> ExportedModel::AsCheckpoint() const {
  v1::ShardCheckpoint checkpoint;
  checkpoint.set_job_id(manifest_.job_id());
  checkpoint.set_num_shards(1);
  checkpoint.set_optimizer(checkpoint::kParametersOnly);
  if (!manifest_.versions().empty()) checkpoint.set_version(manifest_.versions(0));
  int64_t offset = 0;
  for (const v1::ExportTensor& entry : manifest_.dense()) {
    int64_t size = 1;
    for (int64_t d : entry.shape()) size *= d;
    v1::CheckpointSlice* slice = checkpoint.add_slices();
    slice->set_tensor(entry.name());
    slice->set_length(size);
    slice->set_values(tensor::PackFloats(std::span<const float>(dense_).subspan(offset, size)));
    offset += size;
  }
  for (int t = 0; t < manifest_.tables_size(); ++t) {
    const v1::ExportTable& entry = manifest_.tables(t);
    for (const Chunk& chunk : tables_[static_cast<size_t>(t)].chunks) {
      std::vector<float> rows(static_cast<size_t>(chunk.rows.elements()));
      SYNCOPATE_RETURN_IF_ERROR(ReadNpy(chunk.rows_path, chunk.rows, 0, std::span<float>(rows)));
      v1::EmbeddingSlice* slice = checkpoint.add_embeddings();
      slice->set_table(entry.name());
      slice->set_dim(entry.dim());
      slice->set_keys(tensor::PackKeys(chunk.keys));
      slice->set_values(tensor::PackFloats(rows));
    }
  }
  return checkpoint;
}

absl::StatusOr<std::vector<v1::ShardCheckpoint>> LoadParameters(const std::string& from) {
  if (IsExport(from)) {
    SYNCOPATE_ASSIGN_OR_RETURN(const ExportedModel model, ExportedModel::Open(from));
    SYNCOPATE_ASSIGN_OR_RETURN(v1::ShardCheckpoint parameters, model.AsCheckpoint());
    return std::vector<v1::ShardCheckpoint>{std::move(parameters)};
  }
  absl::StatusOr<std::vector<v1::ShardCheckpoint>> set =
      checkpoint::CheckpointStore(from).LoadLatestLayout();
  if (!set.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model.warm_start.from: ", from,
        " is neither an export (no manifest.json) nor a directory with a complete set of shard "
        "checkpoints"));
  }
  return set;
}

absl::Status CheckWarmStart(const v1::JobSpec& job) {
  const std::string& from = job.model().warm_start().from();
  if (from.empty()) return absl::OkStatus();
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("model.warm_start.from: ", from, " ", why));
  };
  // (name, elements) of the source's dense tensors, (name, dim) of its tables.
  std::vector<std::pair<std::string, int64_t>> dense;
  std::vector<std::pair<std::string, int32_t>> tables;
  auto size = [](const auto& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  };
  if (IsExport(from)) {
    // Opened whole (every chunk's header and keys), so a truncated or missing file fails the job
    // here, in one line, rather than every shard.
    absl::StatusOr<ExportedModel> exported = ExportedModel::Open(from);
    if (!exported.ok()) return refuse(exported.status().message());
    for (const v1::ExportTensor& t : exported->manifest().dense()) {
      dense.emplace_back(t.name(), size(t.shape()));
    }
    for (const v1::ExportTable& t : exported->manifest().tables()) {
      tables.emplace_back(t.name(), t.dim());
    }
  } else {
    absl::StatusOr<std::vector<std::string>> files =
        checkpoint::CheckpointStore(from).LatestLayoutFiles();
    if (!files.ok()) {
      return refuse(
          "is neither an export (no manifest.json) nor a directory with a complete set "
          "of shard checkpoints");
    }
    absl::StatusOr<std::unique_ptr<checkpoint::CheckpointReader>> reader =
        checkpoint::CheckpointReader::Open(files->front());
    if (!reader.ok()) return refuse(reader.status().message());
    if (!(*reader)->header().has_job()) return absl::OkStatus();
    const v1::ModelLayoutRecord& source = (*reader)->header().job().model().layout();
    for (const v1::TensorShape& t : source.dense()) dense.emplace_back(t.name(), size(t.shape()));
    for (const v1::TableShape& t : source.tables()) tables.emplace_back(t.name(), t.dim());
  }
  const v1::ModelLayoutRecord& layout = job.model().layout();
  for (int i = 0; i < std::max<int>(layout.dense_size(), static_cast<int>(dense.size())); ++i) {
    if (i >= static_cast<int>(dense.size())) {
      return refuse(absl::StrCat("lacks the job's tensor ", layout.dense(i).name()));
    }
    if (i >= layout.dense_size()) {
      return refuse(absl::StrCat("holds tensor ", dense[i].first, ", which the job's model lacks"));
    }
    const int64_t want = size(layout.dense(i).shape());
    if (dense[i].first != layout.dense(i).name() || dense[i].second != want) {
      return refuse(absl::StrCat("holds tensor ", dense[i].first, " of ", dense[i].second,
                                 " values where the job's model has ", layout.dense(i).name(),
                                 " of ", want));
    }
  }
  for (const auto& [name, dim] : tables) {
    auto it = std::find_if(layout.tables().begin(), layout.tables().end(),
                           [&](const v1::TableShape& t) { return t.name() == name; });
    if (it == layout.tables().end()) {
      return refuse(absl::StrCat("holds table '", name, "', which the job's model lacks"));
    }
    if (it->dim() != dim) {
      return refuse(absl::StrCat("holds table '", name, "' of width ", dim,
                                 ", the job's model has width ", it->dim()));
    }
  }
  return absl::OkStatus();
}

}  // namespace syncopate::model_export
