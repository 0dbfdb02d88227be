#include "libs/model_export/exporter.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/status_macros.h"
#include "libs/job/model_kind.h"
#include "libs/model_export/array_files.h"
#include "libs/tensor/packed.h"

namespace syncopate::model_export {
namespace {

absl::Status Refuse(absl::string_view why) { return absl::FailedPreconditionError(why); }

// One shard's file, read a fragment at a time; `pending` is the fragment not yet consumed.
struct ShardFile {
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  v1::ShardCheckpoint pending;
  bool has_pending = false;

  absl::Status Advance() {
    SYNCOPATE_ASSIGN_OR_RETURN(has_pending, reader->Next(pending));
    return absl::OkStatus();
  }
  const v1::ShardCheckpoint& header() const { return reader->header(); }
};

// The dense tensors of the job's layout, where each sits in the flat vector.
struct DenseTensor {
  const v1::TensorShape* shape;
  int64_t offset = 0;
  int64_t size = 0;
};

absl::StatusOr<std::vector<ShardFile>> OpenLatestSet(const std::string& from) {
  std::error_code error;
  if (!std::filesystem::is_directory(from, error)) {
    return Refuse(absl::StrCat("--from=", from, " is not a directory"));
  }
  absl::StatusOr<std::vector<std::string>> paths =
      checkpoint::CheckpointStore(from).LatestLayoutFiles();
  if (!paths.ok()) {
    return Refuse(absl::StrCat(
        "no complete set of shard checkpoints in ", from,
        " (a checkpoint directory holds shard-<i>-of-<S>-v<version>.ckpt for every shard; the "
        "version a job kept is in its kept/ directory)"));
  }
  std::vector<ShardFile> files;
  for (const std::string& path : *paths) {
    ShardFile file;
    SYNCOPATE_ASSIGN_OR_RETURN(file.reader, checkpoint::CheckpointReader::Open(path));
    files.push_back(std::move(file));
  }
  return files;
}

// Every file of one job and shard count; a kept set of one evaluation point.
absl::Status CheckSet(const std::vector<ShardFile>& files, const std::string& from) {
  const v1::ShardCheckpoint& first = files.front().header();
  const bool kept = first.optimizer() == checkpoint::kParametersOnly;
  for (size_t s = 0; s < files.size(); ++s) {
    const v1::ShardCheckpoint& h = files[s].header();
    if (h.job_id() != first.job_id()) {
      return Refuse(absl::StrCat(from, " mixes checkpoints of jobs '", first.job_id(), "' and '",
                                 h.job_id(), "'"));
    }
    if (h.num_shards() != static_cast<int>(files.size()) || h.shard_id() != static_cast<int>(s)) {
      return Refuse(absl::StrCat(files[s].reader->path(), " says shard ", h.shard_id(), " of ",
                                 h.num_shards(), ", in a set of ", files.size()));
    }
    if ((h.optimizer() == checkpoint::kParametersOnly) != kept) {
      return Refuse(absl::StrCat(from, " mixes kept versions and training checkpoints"));
    }
  }
  if (!kept) return absl::OkStatus();
  // A kept set holds one evaluation point on every shard. After a fault the shards' newest kept
  // files can be of different points (ADR 0017): exporting them would mix two models.
  std::vector<std::string> points;
  bool same = true;
  for (const ShardFile& file : files) {
    const v1::ShardCheckpoint& h = file.header();
    // The job's final parameters (each shard at its own version), one evaluation point, or
    // (files of earlier releases, which name no point) one version.
    if (h.final_point() || first.final_point()) {
      same = same && h.final_point() == first.final_point();
    } else if (h.eval_point() > 0 && first.eval_point() > 0) {
      same = same && h.eval_point() == first.eval_point();
    } else {
      same = same && h.version() == first.version();
    }
    points.push_back(h.final_point()
                         ? absl::StrCat("shard ", h.shard_id(),
                                        ": the final parameters at version ", h.version())
                         : absl::StrCat("shard ", h.shard_id(), ": point ", h.eval_point(),
                                        " at version ", h.version()));
  }
  if (!same) {
    return Refuse(absl::StrCat(
        from, " holds different kept evaluation points across shards (",
        absl::StrJoin(points, "; "),
        "): a shard failed while the kept version was released; export the latest checkpoints or "
        "the next kept version"));
  }
  return absl::OkStatus();
}

// The tables' initializers and admission, from the layout record or, for checkpoints of the
// built-in models written before the record carried them, from the model kind's own layout.
absl::Status CompleteTables(v1::JobSpec& job) {
  v1::ModelLayoutRecord& record = *job.mutable_model()->mutable_layout();
  const bool complete = std::all_of(
      record.tables().begin(), record.tables().end(),
      [](const auto& t) { return t.init().kind() != v1::Initializer::KIND_UNSPECIFIED; });
  if (complete) return absl::OkStatus();
  if (job.model().kind() == v1::ModelSpec::TORCH) {
    return Refuse(
        "the checkpoints' job does not say how its tables initialise (written before "
        "exports existed): train it again with this release to export it");
  }
  SYNCOPATE_ASSIGN_OR_RETURN(const job::ModelLayout layout, job::BuiltinLayoutForJob(job));
  for (v1::TableShape& table : *record.mutable_tables()) {
    for (const v1::EmbeddingTableSpec& spec : layout.tables) {
      if (spec.name() != table.name()) continue;
      *table.mutable_init() = spec.init();
      table.set_admit_after_count(spec.admit_after_count());
    }
  }
  return absl::OkStatus();
}

// A directory name for a table: its name where that is a plain file name.
std::string TableDir(const std::string& name, int index, std::set<std::string>& used) {
  std::string dir;
  for (const char c : name) {
    const bool plain =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    dir.push_back(plain ? c : '_');
  }
  if (dir.empty() || dir == "." || dir == ".." || !used.insert(dir).second) {
    dir = absl::StrCat(dir, "-", index);
    used.insert(dir);
  }
  return dir;
}

v1::ExportModel ModelSection(const v1::JobSpec& job) {
  v1::ExportModel model;
  const v1::ModelSpec& m = job.model();
  model.set_kind(v1::ModelSpec::Kind_Name(m.kind()));
  model.mutable_hidden()->CopyFrom(m.hidden());
  switch (m.kind()) {
    case v1::ModelSpec::MLP:
      if (absl::StatusOr<model::Mlp> mlp = job::ModelForJob(job); mlp.ok()) {
        model.set_input_dim(mlp->input_dim());
        model.set_classes(mlp->num_classes());
      }
      break;
    case v1::ModelSpec::TORCH:
      model.set_module(m.torch().module());
      break;
    default:
      model.set_embedding_dim(m.embedding_dim());
      for (const v1::FieldCross& cross : m.wide_crosses()) {
        v1::ExportFieldPair* pair = model.add_crosses();
        pair->set_first(cross.first() - 1);  // C1..C26 in the job, 0-based fields here
        pair->set_second(cross.second() - 1);
      }
      model.set_cross_layers(m.cross_layers());
      model.set_missing_indicators(m.numeric_missing() != v1::ModelSpec::MISSING_AS_ZERO);
      model.set_fm_numeric(m.fm_fields() == v1::ModelSpec::CATEGORICAL_AND_NUMERIC);
      model.set_cross_numeric(m.cross_fields() == v1::ModelSpec::CATEGORICAL_AND_NUMERIC);
      break;
  }
  return model;
}

v1::ExportDataset DatasetSection(const v1::JobSpec& job) {
  v1::ExportDataset dataset;
  const v1::DatasetSpec& d = job.dataset();
  dataset.set_kind(v1::DatasetSpec::Kind_Name(d.kind()));
  dataset.set_dir(d.dir());
  dataset.set_train_path(d.train_path());
  dataset.set_test_path(d.test_path());
  dataset.set_validation_path(d.validation_path());
  dataset.set_test_limit(d.test_limit());
  return dataset;
}

// Reads every file's dense slices (they come first in a file) into the flat vector.
absl::Status ReadDense(std::vector<ShardFile>& files, const std::vector<DenseTensor>& tensors,
                       std::vector<float>& flat) {
  std::vector<bool> covered(flat.size(), false);
  std::vector<float> values;
  for (ShardFile& file : files) {
    while (true) {
      SYNCOPATE_RETURN_IF_ERROR(file.Advance());
      if (!file.has_pending) break;
      for (const v1::CheckpointSlice& slice : file.pending.slices()) {
        auto it = std::find_if(tensors.begin(), tensors.end(), [&](const DenseTensor& t) {
          return t.shape->name() == slice.tensor();
        });
        if (it == tensors.end()) {
          return Refuse(absl::StrCat(file.reader->path(), " holds tensor '", slice.tensor(),
                                     "', which the job's model does not have"));
        }
        if (slice.tensor_offset() < 0 || slice.length() < 0 ||
            slice.tensor_offset() + slice.length() > it->size) {
          return absl::DataLossError(absl::StrCat(file.reader->path(), ": a slice of ",
                                                  slice.tensor(), " lies outside it"));
        }
        values.resize(static_cast<size_t>(slice.length()));
        SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(slice.values(), values));
        const int64_t at = it->offset + slice.tensor_offset();
        for (int64_t i = 0; i < slice.length(); ++i) {
          if (covered[static_cast<size_t>(at + i)]) {
            return Refuse(absl::StrCat("the checkpoints hold element ", slice.tensor_offset() + i,
                                       " of ", slice.tensor(), " twice"));
          }
          covered[static_cast<size_t>(at + i)] = true;
        }
        std::copy(values.begin(), values.end(), flat.begin() + at);
      }
      if (file.pending.embeddings_size() > 0) break;  // the tables' part starts
    }
  }
  const int64_t filled = std::count(covered.begin(), covered.end(), true);
  if (filled != static_cast<int64_t>(flat.size())) {
    return Refuse(absl::StrCat("the checkpoints hold ", filled, " of the model's ", flat.size(),
                               " dense values: they were written for another layout of the model"));
  }
  return absl::OkStatus();
}

// The table's rows from every file, merged in key order, written in chunks.
class TableMerge {
 public:
  TableMerge(std::vector<ShardFile>& files, const v1::TableShape& table)
      : files_(files), table_(table), cursors_(files.size()) {}

  absl::Status Run(const std::string& dir, const std::string& relative, int64_t chunk_rows,
                   v1::ExportTable& out) {
    int64_t total = 0;
    for (const ShardFile& file : files_) {
      for (const v1::TableRowCount& count : file.header().table_rows()) {
        if (count.table() == table_.name()) total += count.rows();
      }
    }
    using Entry = std::pair<uint64_t, size_t>;  // (key, file), smallest first
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (size_t f = 0; f < files_.size(); ++f) {
      SYNCOPATE_ASSIGN_OR_RETURN(const bool has, Load(f));
      if (has) heap.emplace(cursors_[f].keys[0], f);
    }
    const size_t dim = static_cast<size_t>(table_.dim());
    int64_t written = 0;
    std::optional<NpyWriter> keys_out, rows_out;
    uint64_t previous = 0;
    while (!heap.empty()) {
      const auto [key, f] = heap.top();
      heap.pop();
      if (written > 0 && key <= previous) {
        return Refuse(absl::StrCat(
            "table '", table_.name(), "': key ", key,
            key == previous ? " is in two shards' files" : " is out of order in its file"));
      }
      previous = key;
      if (written == total) {
        return absl::DataLossError(absl::StrCat("table '", table_.name(), "' holds more rows than ",
                                                "the checkpoints' headers count (", total, ")"));
      }
      if (written % chunk_rows == 0) {
        SYNCOPATE_RETURN_IF_ERROR(CloseChunk(keys_out, rows_out));
        const int64_t n = std::min(chunk_rows, total - written);
        const int chunk = static_cast<int>(written / chunk_rows);
        v1::ExportChunk* files = out.add_chunks();
        files->set_keys(absl::StrFormat("%s/keys-%05d.npy", relative, chunk));
        files->set_rows(absl::StrFormat("%s/rows-%05d.npy", relative, chunk));
        files->set_count(n);
        SYNCOPATE_ASSIGN_OR_RETURN(
            keys_out,
            NpyWriter::Create(absl::StrCat(dir, "/", files->keys()), ArrayType::kUint64, {n}));
        SYNCOPATE_ASSIGN_OR_RETURN(
            rows_out, NpyWriter::Create(absl::StrCat(dir, "/", files->rows()), ArrayType::kFloat32,
                                        {n, static_cast<int64_t>(dim)}));
      }
      Cursor& c = cursors_[f];
      keys_out->Append(std::span<const uint64_t>(&key, 1));
      rows_out->Append(std::span<const float>(c.values).subspan(c.at * dim, dim));
      ++written;
      if (++c.at == c.keys.size()) {
        SYNCOPATE_ASSIGN_OR_RETURN(const bool more, Load(f));
        if (!more) continue;
      }
      heap.emplace(c.keys[c.at], f);
    }
    SYNCOPATE_RETURN_IF_ERROR(CloseChunk(keys_out, rows_out));
    if (written != total) {
      return absl::DataLossError(absl::StrCat("table '", table_.name(), "': the checkpoints hold ",
                                              written, " rows, their headers count ", total));
    }
    out.set_count(written);
    return absl::OkStatus();
  }

 private:
  struct Cursor {
    std::vector<uint64_t> keys;
    std::vector<float> values;
    size_t at = 0;
  };

  static absl::Status CloseChunk(std::optional<NpyWriter>& keys, std::optional<NpyWriter>& rows) {
    if (keys.has_value()) SYNCOPATE_RETURN_IF_ERROR(keys->Close());
    if (rows.has_value()) SYNCOPATE_RETURN_IF_ERROR(rows->Close());
    keys.reset();
    rows.reset();
    return absl::OkStatus();
  }

  // Loads file f's next non-empty chunk of this table into its cursor; false when the file has
  // no more rows of it (its pending fragment is then another table's, or it ended).
  absl::StatusOr<bool> Load(size_t f) {
    ShardFile& file = files_[f];
    Cursor& c = cursors_[f];
    while (file.has_pending && file.pending.embeddings_size() > 0) {
      const v1::EmbeddingSlice& chunk = file.pending.embeddings(0);
      if (chunk.table() != table_.name()) return false;
      if (chunk.dim() != table_.dim()) {
        return Refuse(absl::StrCat("table '", table_.name(), "' has width ", chunk.dim(), " in ",
                                   file.reader->path(), " and ", table_.dim(), " in the job"));
      }
      SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackKeys(chunk.keys(), c.keys));
      c.values.resize(c.keys.size() * static_cast<size_t>(table_.dim()));
      SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(chunk.values(), c.values));
      c.at = 0;
      SYNCOPATE_RETURN_IF_ERROR(file.Advance());
      if (!c.keys.empty()) return true;
    }
    return false;
  }

  std::vector<ShardFile>& files_;
  const v1::TableShape& table_;
  std::vector<Cursor> cursors_;
};

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The job to export: the one the checkpoints carry, else the request's, with its model's layout
// recorded and its tables completed.
absl::StatusOr<v1::JobSpec> ExportedJob(const ExportRequest& request,
                                        const v1::ShardCheckpoint& first) {
  v1::JobSpec job;
  if (first.has_job()) {
    job = first.job();
  } else if (request.job != nullptr) {
    job = *request.job;
  } else {
    return Refuse(absl::StrCat("the checkpoints in ", request.from,
                               " were written before exports and carry no job spec: pass "
                               "--job=<the job's spec file>"));
  }
  if (job.job_id() != first.job_id()) {
    return Refuse(absl::StrCat("the checkpoints are of job '", first.job_id(),
                               "', the job spec is of '", job.job_id(), "'"));
  }
  if (!job.model().has_layout()) {
    if (job.model().kind() == v1::ModelSpec::TORCH) {
      return Refuse(
          "the job spec has no recorded layout (model.layout): export the job the "
          "checkpoints carry, or the job.textproto of an earlier export");
    }
    SYNCOPATE_ASSIGN_OR_RETURN(const job::ModelLayout layout, job::BuiltinLayoutForJob(job));
    *job.mutable_model()->mutable_layout() = job::LayoutRecord(layout);
  }
  SYNCOPATE_RETURN_IF_ERROR(CompleteTables(job));
  return job;
}

// The dense parameters: the flat vector, then one safetensors file in the layout's order, each
// tensor listed in the manifest.
absl::Status WriteDense(std::vector<ShardFile>& files, const v1::ModelLayoutRecord& record,
                        bool torch, const std::string& dir, v1::ExportManifest& manifest) {
  std::vector<DenseTensor> tensors;
  int64_t flat_size = 0;
  for (const v1::TensorShape& shape : record.dense()) {
    int64_t size = 1;
    for (int64_t d : shape.shape()) size *= d;
    tensors.push_back({&shape, flat_size, size});
    flat_size += size;
  }
  std::vector<float> flat(static_cast<size_t>(flat_size));
  SYNCOPATE_RETURN_IF_ERROR(ReadDense(files, tensors, flat));
  std::vector<NamedTensor> named;
  for (const DenseTensor& t : tensors) {
    NamedTensor tensor{.name = t.shape->name(),
                       .shape = {t.shape->shape().begin(), t.shape->shape().end()},
                       .values = std::span<const float>(flat).subspan(t.offset, t.size)};
    // The built-in models' [outputs x inputs] column-major tensors read row-major as
    // [inputs, outputs].
    if (!torch) std::reverse(tensor.shape.begin(), tensor.shape.end());
    v1::ExportTensor* entry = manifest.add_dense();
    entry->set_name(tensor.name);
    entry->mutable_shape()->Add(tensor.shape.begin(), tensor.shape.end());
    entry->set_role(t.shape->buffer() ? "buffer" : "parameter");
    if (t.shape->buffer()) entry->set_dtype(t.shape->dtype());
    named.push_back(std::move(tensor));
  }
  return WriteSafetensors(absl::StrCat(dir, "/", kDenseFile), named);
}

// The embedding tables, one after another (every file yields them in the layout's order), each
// merged from the shards' files into chunks of `chunk_rows_requested` rows (when positive; else
// about kChunkBytes each).
absl::Status WriteTables(std::vector<ShardFile>& files, const v1::ModelLayoutRecord& record,
                         int64_t chunk_rows_requested, const std::string& dir,
                         v1::ExportManifest& manifest) {
  std::set<std::string> used;
  for (int t = 0; t < record.tables_size(); ++t) {
    const v1::TableShape& table = record.tables(t);
    v1::ExportTable* out = manifest.add_tables();
    out->set_name(table.name());
    out->set_dim(table.dim());
    *out->mutable_initializer() = table.init();
    out->set_absent_rows(table.admit_after_count() > 1 ? "zeros" : "initial");
    const std::string relative = absl::StrCat("tables/", TableDir(table.name(), t, used));
    std::filesystem::create_directories(absl::StrCat(dir, "/", relative));
    const int64_t chunk_rows =
        chunk_rows_requested > 0
            ? chunk_rows_requested
            : std::max<int64_t>(1, kChunkBytes / (static_cast<int64_t>(table.dim()) * 4));
    SYNCOPATE_RETURN_IF_ERROR(TableMerge(files, table).Run(dir, relative, chunk_rows, *out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ExportManifest> WriteExport(const ExportRequest& request,
                                               const std::string& dir) {
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<ShardFile> files, OpenLatestSet(request.from));
  SYNCOPATE_RETURN_IF_ERROR(CheckSet(files, request.from));
  const v1::ShardCheckpoint& first = files.front().header();
  SYNCOPATE_ASSIGN_OR_RETURN(v1::JobSpec job, ExportedJob(request, first));
  const v1::ModelLayoutRecord& record = job.model().layout();
  const bool torch = job.model().kind() == v1::ModelSpec::TORCH;

  v1::ExportManifest manifest;
  manifest.set_format(kFormat);
  manifest.set_job_id(job.job_id());
  manifest.set_model_kind(v1::ModelSpec::Kind_Name(job.model().kind()));
  manifest.set_seed(job.seed());
  std::set<int64_t> versions;
  for (const ShardFile& file : files) versions.insert(file.header().version());
  for (int64_t v : versions) manifest.add_versions(v);
  const bool kept = first.optimizer() == checkpoint::kParametersOnly;
  manifest.set_source(kept ? "kept" : "latest");
  if (kept) manifest.set_eval_point(first.eval_point());
  *manifest.mutable_model() = ModelSection(job);
  *manifest.mutable_dataset() = DatasetSection(job);

  SYNCOPATE_RETURN_IF_ERROR(WriteDense(files, record, torch, dir, manifest));
  SYNCOPATE_RETURN_IF_ERROR(WriteTables(files, record, request.chunk_rows, dir, manifest));
  for (const ShardFile& file : files) {
    if (file.has_pending && file.pending.embeddings_size() > 0) {
      return Refuse(absl::StrCat(file.reader->path(), " holds rows of table '",
                                 file.pending.embeddings(0).table(),
                                 "', which the job's model does not have"));
    }
  }
  // The model's job, not its cluster's shape: the same state exported from any number of shards
  // is the same export.
  job.clear_num_shards();
  job.clear_pinned_shard_modes();
  std::string job_text;
  google::protobuf::TextFormat::PrintToString(job, &job_text);
  SYNCOPATE_RETURN_IF_ERROR(WriteText(absl::StrCat(dir, "/", kJobFile), job_text));
  SYNCOPATE_RETURN_IF_ERROR(
      WriteText(absl::StrCat(dir, "/", kManifestFile), ManifestJson(manifest)));
  return manifest;
}

absl::StatusOr<SourceSummary> SummarizeSource(const std::string& from) {
  SYNCOPATE_ASSIGN_OR_RETURN(const std::vector<ShardFile> files, OpenLatestSet(from));
  SourceSummary summary;
  std::set<int64_t> versions;
  for (const ShardFile& file : files) {
    versions.insert(file.header().version());
    summary.files.push_back(file.reader->path());
    summary.kept = summary.kept || file.header().optimizer() == checkpoint::kParametersOnly;
  }
  summary.versions.assign(versions.begin(), versions.end());
  return summary;
}

absl::StatusOr<v1::ExportManifest> ExportTo(const ExportRequest& request, const std::string& out,
                                            const FormatWriter& formats) {
  std::error_code error;
  if (std::filesystem::exists(out, error)) {
    return Refuse(absl::StrCat("--out=", out, " exists: an export is written to a new directory"));
  }
  const std::filesystem::path target = std::filesystem::absolute(out, error);
  const std::string tmp = absl::StrCat(target.parent_path().string(), "/.",
                                       target.filename().string(), ".partial-", getpid());
  std::filesystem::remove_all(tmp, error);
  std::filesystem::create_directories(tmp, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", tmp, ": ", error.message()));
  }
  absl::StatusOr<v1::ExportManifest> manifest = WriteExport(request, tmp);
  absl::Status done = manifest.status();
  if (done.ok() && formats) done = formats(tmp, *manifest);
  if (done.ok() && std::rename(tmp.c_str(), target.c_str()) != 0) {
    done = absl::UnavailableError(
        absl::StrCat("cannot rename ", tmp, " to ", out, ": ", std::strerror(errno)));
  }
  if (!done.ok()) {
    std::filesystem::remove_all(tmp, error);
    return done;
  }
  return manifest;
}

}  // namespace syncopate::model_export
