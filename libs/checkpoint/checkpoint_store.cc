#include "libs/checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "libs/common/status_macros.h"
#include "libs/tensor/packed.h"

namespace syncopate::checkpoint {
namespace {

constexpr char kMagic[8] = {'S', 'Y', 'N', 'C', 'K', 'P', 'T', '1'};
constexpr char kMagic2[8] = {'S', 'Y', 'N', 'C', 'K', 'P', 'T', '2'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint64_t);
constexpr size_t kTrailerBytes = sizeof(uint32_t);
// Format 2's end record opens with a length no record can have.
constexpr uint64_t kEndMarker = ~uint64_t{0};
// The largest record a reader accepts: protobuf parses nothing larger anyway, and a crafted
// length must not make the reader allocate what it claims.
constexpr uint64_t kMaxRecordBytes = (uint64_t{1} << 31) - 1;

uint32_t Crc32(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes 32-bit lengths: feed larger buffers in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < data.size(); at += kPiece) {
    const size_t n = std::min(kPiece, data.size() - at);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", path, ": ", strerror(errno)));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("fsync ", path, ": ", strerror(errno)));
  return absl::OkStatus();
}

// Durable before visible: the written temporary file's data, then the rename, then the
// directory entry.
absl::Status Commit(const std::string& tmp, const std::string& path) {
  absl::Status synced = FsyncPath(tmp, O_RDONLY);
  if (!synced.ok()) return synced;
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("rename ", tmp, " -> ", path, ": ", strerror(errno)));
  }
  return FsyncPath(std::filesystem::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
}

struct FileName {
  int shard_id;
  int num_shards;
  int64_t version;
  std::string path;
};

std::vector<FileName> ListCheckpoints(const std::string& dir) {
  std::vector<FileName> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    // shard-<id>-of-<S>-v<version>.ckpt, and nothing else (temporary files end differently).
    const std::string name = entry.path().filename().string();
    int shard = 0, shards = 0, consumed = 0;
    int64_t version = 0;
    if (std::sscanf(name.c_str(), "shard-%d-of-%d-v%" SCNd64 ".ckpt%n", &shard, &shards, &version,
                    &consumed) != 3 ||
        consumed != static_cast<int>(name.size())) {
      continue;
    }
    files.push_back({shard, shards, version, entry.path().string()});
  }
  // Newest first.
  std::sort(files.begin(), files.end(),
            [](const FileName& a, const FileName& b) { return a.version > b.version; });
  return files;
}

// Format 2's records, written one at a time to a stream.
class RecordWriter {
 public:
  explicit RecordWriter(std::ofstream& out) : out_(out) { out_.write(kMagic2, sizeof(kMagic2)); }

  void Write(const v1::ShardCheckpoint& fragment) {
    fragment.SerializeToString(&payload_);
    const uint64_t length = payload_.size();
    const uint32_t crc = Crc32(payload_);
    out_.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out_.write(payload_.data(), static_cast<std::streamsize>(payload_.size()));
    out_.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
    ++records_;
  }
  void End() {
    const uint32_t crc =
        Crc32(std::string_view(reinterpret_cast<const char*>(&records_), sizeof(records_)));
    out_.write(reinterpret_cast<const char*>(&kEndMarker), sizeof(kEndMarker));
    out_.write(reinterpret_cast<const char*>(&records_), sizeof(records_));
    out_.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
  }

 private:
  std::ofstream& out_;
  std::string payload_;
  uint64_t records_ = 0;
};

// Writes `slice` as records of at most ~kRecordBytes each (element ranges of the tensor).
void WriteDenseSlice(const v1::CheckpointSlice& slice, RecordWriter& writer) {
  const int64_t element_bytes =
      static_cast<int64_t>(sizeof(float)) * (1 + slice.optimizer_state_size());
  const int64_t per_record = std::max<int64_t>(1, kRecordBytes / element_bytes);
  if (slice.length() <= per_record) {
    v1::ShardCheckpoint fragment;
    *fragment.add_slices() = slice;
    writer.Write(fragment);
    return;
  }
  for (int64_t begin = 0; begin < slice.length(); begin += per_record) {
    const int64_t n = std::min(per_record, slice.length() - begin);
    const size_t byte_begin = static_cast<size_t>(begin) * sizeof(float);
    const size_t byte_count = static_cast<size_t>(n) * sizeof(float);
    v1::ShardCheckpoint fragment;
    v1::CheckpointSlice* out = fragment.add_slices();
    out->set_tensor(slice.tensor());
    out->set_tensor_offset(slice.tensor_offset() + begin);
    out->set_length(n);
    out->set_values(slice.values().substr(byte_begin, byte_count));
    for (const std::string& vector : slice.optimizer_state()) {
      out->add_optimizer_state(vector.substr(byte_begin, byte_count));
    }
    writer.Write(fragment);
  }
}

// One table's rows, from every EmbeddingSlice of the checkpoint that names it, in key order.
struct RowRef {
  uint64_t key;
  uint32_t slice;  // index into the table's slices
  uint32_t row;
};

absl::Status WriteTable(const std::vector<const v1::EmbeddingSlice*>& slices,
                        RecordWriter& writer) {
  const v1::EmbeddingSlice& first = *slices.front();
  const int dim = first.dim();
  const int slots = first.optimizer_state_size();
  bool has_touched = false;
  const v1::AdmissionSketchState* admission = nullptr;
  std::vector<RowRef> order;
  std::vector<uint64_t> keys;
  for (size_t s = 0; s < slices.size(); ++s) {
    const v1::EmbeddingSlice& slice = *slices[s];
    SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackKeys(slice.keys(), keys));
    const uint64_t row_bytes = static_cast<uint64_t>(dim) * sizeof(float);
    bool sound = slice.dim() == dim && dim > 0 && slice.optimizer_state_size() == slots &&
                 slice.values().size() == keys.size() * row_bytes &&
                 keys.size() <= std::numeric_limits<uint32_t>::max();
    for (const std::string& vector : slice.optimizer_state()) {
      sound = sound && vector.size() == keys.size() * row_bytes;
    }
    sound = sound && (slice.last_touched().empty() ||
                      slice.last_touched().size() == keys.size() * sizeof(uint64_t));
    if (!sound) {
      return absl::InternalError(absl::StrCat("checkpoint rows of table '", slice.table(),
                                              "' are inconsistent with their ", keys.size(),
                                              " keys"));
    }
    has_touched = has_touched || !slice.last_touched().empty();
    if (admission == nullptr && slice.has_admission()) admission = &slice.admission();
    for (size_t r = 0; r < keys.size(); ++r) {
      order.push_back({keys[r], static_cast<uint32_t>(s), static_cast<uint32_t>(r)});
    }
  }
  std::sort(order.begin(), order.end(),
            [](const RowRef& a, const RowRef& b) { return a.key < b.key; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].key == order[i - 1].key) {
      return absl::InternalError(
          absl::StrCat("key ", order[i].key, " appears twice in table '", first.table(), "'"));
    }
  }
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  const int64_t per_row = static_cast<int64_t>(row_bytes) * (1 + slots) + 16;
  const size_t per_record = static_cast<size_t>(std::max<int64_t>(1, kRecordBytes / per_row));
  // At least one record per table, so an empty table keeps its admission sketch.
  for (size_t begin = 0; begin == 0 || begin < order.size(); begin += per_record) {
    const size_t n = std::min(per_record, order.size() - begin);
    v1::ShardCheckpoint fragment;
    v1::EmbeddingSlice* out = fragment.add_embeddings();
    out->set_table(first.table());
    out->set_dim(dim);
    std::string chunk_keys(n * sizeof(uint64_t), '\0');
    std::string values(n * row_bytes, '\0');
    std::vector<std::string> state(static_cast<size_t>(slots), std::string(n * row_bytes, '\0'));
    std::string touched(has_touched ? n * sizeof(uint64_t) : 0, '\0');
    for (size_t i = 0; i < n; ++i) {
      const RowRef& ref = order[begin + i];
      const v1::EmbeddingSlice& from = *slices[ref.slice];
      std::memcpy(chunk_keys.data() + i * sizeof(uint64_t), &ref.key, sizeof(uint64_t));
      std::memcpy(values.data() + i * row_bytes, from.values().data() + ref.row * row_bytes,
                  row_bytes);
      for (int k = 0; k < slots; ++k) {
        std::memcpy(state[static_cast<size_t>(k)].data() + i * row_bytes,
                    from.optimizer_state(k).data() + ref.row * row_bytes, row_bytes);
      }
      if (has_touched) {
        // A slice without idle times (it did not evict) counts as touched at the checkpoint.
        uint64_t when = 0;
        if (!from.last_touched().empty()) {
          std::memcpy(&when, from.last_touched().data() + ref.row * sizeof(uint64_t),
                      sizeof(uint64_t));
        }
        std::memcpy(touched.data() + i * sizeof(uint64_t), &when, sizeof(uint64_t));
      }
    }
    out->set_keys(std::move(chunk_keys));
    out->set_values(std::move(values));
    for (std::string& vector : state) out->add_optimizer_state(std::move(vector));
    if (has_touched) out->set_last_touched(std::move(touched));
    if (begin == 0 && admission != nullptr) *out->mutable_admission() = *admission;
    writer.Write(fragment);
    if (order.empty()) break;
  }
  return absl::OkStatus();
}

// A temporary name no other writer of `path` uses: the process id alone is not enough, since
// two processes of one shard in two containers (a replacement and a stale one) can both be
// PID 1 of their own namespace while writing to one shared directory.
std::string TempName(const std::string& path) {
  std::random_device random;
  return absl::StrFormat("%s.tmp.%d.%08x", path, getpid(), random());
}

absl::Status DataLoss(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint ", path, " ", why));
}

}  // namespace

absl::Status WriteFramedFile(const std::string& path, const std::string& payload) {
  const uint64_t length = payload.size();
  const uint32_t crc = Crc32(payload);
  const std::string tmp = TempName(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(&length), sizeof(length));
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
    if (!out.flush()) {
      std::filesystem::remove(tmp);
      return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
    }
  }
  return Commit(tmp, path);
}

absl::StatusOr<std::string> ReadFramedFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  if (data.size() < kHeaderBytes + kTrailerBytes ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a Syncopate state file (bad header)"));
  }
  uint64_t length = 0;
  std::memcpy(&length, data.data() + sizeof(kMagic), sizeof(length));
  if (data.size() != kHeaderBytes + length + kTrailerBytes) {
    return absl::DataLossError(absl::StrCat(path, " is truncated: ", data.size(),
                                            " bytes, expected ",
                                            kHeaderBytes + length + kTrailerBytes));
  }
  std::string payload = data.substr(kHeaderBytes, length);
  uint32_t crc = 0;
  std::memcpy(&crc, data.data() + kHeaderBytes + length, sizeof(crc));
  if (crc != Crc32(payload)) return absl::DataLossError(absl::StrCat(path, " fails its checksum"));
  return payload;
}

absl::Status WriteCheckpointFile(const std::string& path, const v1::ShardCheckpoint& checkpoint) {
  return WriteCheckpointFileChecked(path, checkpoint, nullptr);
}

absl::Status WriteCheckpointFileChecked(const std::string& path,
                                        const v1::ShardCheckpoint& checkpoint,
                                        const ShardClaim* claim) {
  v1::ShardCheckpoint header = checkpoint;
  header.clear_slices();
  header.clear_embeddings();
  header.clear_table_rows();
  // Tables in the order they first appear; each written whole, sorted, before the next.
  std::vector<std::pair<std::string, std::vector<const v1::EmbeddingSlice*>>> tables;
  for (const v1::EmbeddingSlice& slice : checkpoint.embeddings()) {
    auto it = std::find_if(tables.begin(), tables.end(),
                           [&](const auto& t) { return t.first == slice.table(); });
    if (it == tables.end()) {
      tables.emplace_back(slice.table(), std::vector<const v1::EmbeddingSlice*>());
      it = std::prev(tables.end());
    }
    it->second.push_back(&slice);
  }
  for (const auto& [name, slices] : tables) {
    int64_t rows = 0;
    for (const v1::EmbeddingSlice* slice : slices) {
      rows += static_cast<int64_t>(slice->keys().size() / sizeof(uint64_t));
    }
    v1::TableRowCount* count = header.add_table_rows();
    count->set_table(name);
    count->set_rows(rows);
  }
  const std::string tmp = TempName(path);
  absl::Status written;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RecordWriter writer(out);
    writer.Write(header);
    for (const v1::CheckpointSlice& slice : checkpoint.slices()) WriteDenseSlice(slice, writer);
    for (const auto& [name, slices] : tables) {
      written = WriteTable(slices, writer);
      if (!written.ok()) break;
    }
    if (written.ok()) {
      writer.End();
      if (!out.flush()) written = absl::UnavailableError(absl::StrCat("cannot write ", tmp));
    }
  }
  // The claim again just before the file becomes visible: writing a large checkpoint takes
  // long, and a process frozen meanwhile may have been replaced (shard_claim.h).
  if (written.ok() && claim != nullptr) written = claim->Check();
  if (!written.ok()) {
    std::error_code error;
    std::filesystem::remove(tmp, error);
    return written;
  }
  return Commit(tmp, path);
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& path) {
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->path_ = path;
  reader->in_.open(path, std::ios::binary);
  if (!reader->in_)
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " does not exist"));
  char magic[sizeof(kMagic)] = {};
  reader->in_.read(magic, sizeof(magic));
  if (reader->in_ && std::memcmp(magic, kMagic2, sizeof(kMagic2)) == 0) {
    reader->format_ = 2;
    v1::ShardCheckpoint header;
    SYNCOPATE_ASSIGN_OR_RETURN(const bool read, reader->Next(header));
    if (!read || header.slices_size() > 0 || header.embeddings_size() > 0) {
      return DataLoss(path, "has no header record");
    }
    reader->header_ = std::move(header);
    return reader;
  }
  reader->in_.close();
  // Format 1: one framed message, read whole.
  absl::StatusOr<std::string> payload = ReadFramedFile(path);
  if (!payload.ok()) {
    return absl::Status(payload.status().code(),
                        absl::StrCat("checkpoint ", payload.status().message()));
  }
  reader->format_ = 1;
  reader->whole_ = std::make_unique<v1::ShardCheckpoint>();
  if (!reader->whole_->ParseFromString(*payload)) return DataLoss(path, "does not parse");
  reader->header_ = *reader->whole_;
  reader->header_.clear_slices();
  reader->header_.clear_embeddings();
  reader->header_.clear_table_rows();
  for (const v1::EmbeddingSlice& slice : reader->whole_->embeddings()) {
    const int64_t rows = static_cast<int64_t>(slice.keys().size() / sizeof(uint64_t));
    bool counted = false;
    for (v1::TableRowCount& count : *reader->header_.mutable_table_rows()) {
      if (count.table() == slice.table()) {
        count.set_rows(count.rows() + rows);
        counted = true;
      }
    }
    if (!counted) {
      v1::TableRowCount* count = reader->header_.add_table_rows();
      count->set_table(slice.table());
      count->set_rows(rows);
    }
  }
  return reader;
}

absl::StatusOr<bool> CheckpointReader::Next(v1::ShardCheckpoint& fragment) {
  fragment.Clear();
  if (format_ == 1) {
    if (next_slice_ < whole_->slices_size()) {
      *fragment.add_slices() = std::move(*whole_->mutable_slices(next_slice_++));
      return true;
    }
    if (next_embedding_ < whole_->embeddings_size()) {
      *fragment.add_embeddings() = std::move(*whole_->mutable_embeddings(next_embedding_++));
      return true;
    }
    return false;
  }
  uint64_t length = 0;
  if (!in_.read(reinterpret_cast<char*>(&length), sizeof(length))) {
    return DataLoss(path_, "is truncated: it ends before its end record");
  }
  if (length == kEndMarker) {
    uint64_t records = 0;
    uint32_t crc = 0;
    in_.read(reinterpret_cast<char*>(&records), sizeof(records));
    in_.read(reinterpret_cast<char*>(&crc), sizeof(crc));
    if (!in_) return DataLoss(path_, "is truncated in its end record");
    if (crc != Crc32(std::string_view(reinterpret_cast<const char*>(&records), sizeof(records))) ||
        records != records_read_) {
      return DataLoss(path_, absl::StrCat("ends after ", records_read_,
                                          " records, its end record says ", records));
    }
    if (in_.peek() != std::ifstream::traits_type::eof()) {
      return DataLoss(path_, "has bytes after its end record");
    }
    return false;
  }
  if (length > kMaxRecordBytes) {
    return DataLoss(path_, absl::StrCat("has a record of ", length, " bytes (corrupt)"));
  }
  // A crafted length must not make us allocate what it claims: check what the file still holds.
  const std::streampos here = in_.tellg();
  in_.seekg(0, std::ios::end);
  const std::streampos size = in_.tellg();
  in_.seekg(here);
  if (static_cast<uint64_t>(size - here) < length + sizeof(uint32_t)) {
    return DataLoss(path_, absl::StrCat("is truncated: record ", records_read_, " needs ", length,
                                        " bytes, ", static_cast<int64_t>(size - here), " remain"));
  }
  std::string payload(length, '\0');
  uint32_t crc = 0;
  in_.read(payload.data(), static_cast<std::streamsize>(length));
  in_.read(reinterpret_cast<char*>(&crc), sizeof(crc));
  if (!in_) return DataLoss(path_, "is truncated");
  if (crc != Crc32(payload)) {
    return DataLoss(path_, absl::StrCat("fails its checksum at record ", records_read_));
  }
  if (!fragment.ParseFromString(payload)) {
    return DataLoss(path_, absl::StrCat("record ", records_read_, " does not parse"));
  }
  ++records_read_;
  return true;
}

absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path) {
  SYNCOPATE_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                             CheckpointReader::Open(path));
  v1::ShardCheckpoint checkpoint = reader->header();
  v1::ShardCheckpoint fragment;
  while (true) {
    SYNCOPATE_ASSIGN_OR_RETURN(const bool more, reader->Next(fragment));
    if (!more) break;
    for (v1::CheckpointSlice& slice : *fragment.mutable_slices()) {
      *checkpoint.add_slices() = std::move(slice);
    }
    for (v1::EmbeddingSlice& slice : *fragment.mutable_embeddings()) {
      *checkpoint.add_embeddings() = std::move(slice);
    }
  }
  return checkpoint;
}

absl::Status CheckpointStore::Save(const v1::ShardCheckpoint& checkpoint, const ShardClaim* claim) {
  if (claim != nullptr) SYNCOPATE_RETURN_IF_ERROR(claim->Check());
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir_, ": ", error.message()));
  }
  const std::string path =
      absl::StrFormat("%s/shard-%d-of-%d-v%012d.ckpt", dir_, checkpoint.shard_id(),
                      checkpoint.num_shards(), checkpoint.version());
  absl::Status written = WriteCheckpointFileChecked(path, checkpoint, claim);
  if (!written.ok()) return written;
  if (claim != nullptr) {
    // Lost between the last check and the rename: take the file back (it may have replaced the
    // new claimant's file of the same version; that claimant's older file remains) and prune
    // nothing.
    if (absl::Status still = claim->Check(); !still.ok()) {
      std::filesystem::remove(path, error);
      return still;
    }
  }
  int kept = 0;
  for (const FileName& file : ListCheckpoints(dir_)) {
    if (file.shard_id != checkpoint.shard_id() || file.num_shards != checkpoint.num_shards()) {
      continue;
    }
    if (++kept > kKeep) std::filesystem::remove(file.path, error);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardCheckpoint> CheckpointStore::LoadLatest(
    int shard_id, int num_shards, std::vector<std::string>* refused) const {
  for (const FileName& file : ListCheckpoints(dir_)) {
    if (file.shard_id != shard_id || file.num_shards != num_shards) continue;
    absl::StatusOr<v1::ShardCheckpoint> checkpoint = ReadCheckpointFile(file.path);
    if (checkpoint.ok()) return checkpoint;
    if (refused != nullptr) refused->push_back(std::string(checkpoint.status().message()));
  }
  return absl::NotFoundError(
      absl::StrCat("no valid checkpoint of shard ", shard_id, " of ", num_shards, " in ", dir_));
}

absl::StatusOr<std::vector<v1::ShardCheckpoint>> CheckpointStore::LoadLatestLayout(
    std::vector<std::string>* refused) const {
  std::map<int, int64_t> best_version_by_layout;  // num_shards -> newest version seen
  for (const FileName& file : ListCheckpoints(dir_)) {
    best_version_by_layout.emplace(file.num_shards, file.version);
  }
  std::vector<std::pair<int64_t, int>> layouts;
  layouts.reserve(best_version_by_layout.size());
  for (const auto& [shards, version] : best_version_by_layout) {
    layouts.emplace_back(version, shards);
  }
  std::sort(layouts.rbegin(), layouts.rend());
  for (const auto& [version, num_shards] : layouts) {
    std::vector<v1::ShardCheckpoint> set;
    for (int s = 0; s < num_shards; ++s) {
      absl::StatusOr<v1::ShardCheckpoint> checkpoint = LoadLatest(s, num_shards, refused);
      if (!checkpoint.ok()) break;
      set.push_back(*std::move(checkpoint));
    }
    if (static_cast<int>(set.size()) == num_shards) return set;
  }
  return absl::NotFoundError(absl::StrCat("no complete set of valid checkpoints in ", dir_));
}

absl::StatusOr<std::vector<std::string>> CheckpointStore::LatestLayoutFiles() const {
  // Newest first: the first file seen of a (layout, shard) is its newest.
  std::map<int, std::map<int, std::string>> newest;  // num_shards -> shard -> path
  std::map<int, int64_t> best_version;               // num_shards -> newest version
  for (const FileName& file : ListCheckpoints(dir_)) {
    if (file.shard_id < 0 || file.shard_id >= file.num_shards) continue;
    newest[file.num_shards].emplace(file.shard_id, file.path);
    best_version.emplace(file.num_shards, file.version);
  }
  std::vector<std::pair<int64_t, int>> layouts;
  for (const auto& [shards, version] : best_version) layouts.emplace_back(version, shards);
  std::sort(layouts.rbegin(), layouts.rend());
  for (const auto& [version, num_shards] : layouts) {
    const std::map<int, std::string>& files = newest[num_shards];
    if (static_cast<int>(files.size()) != num_shards) continue;
    std::vector<std::string> paths;
    for (const auto& [shard, path] : files) paths.push_back(path);
    return paths;
  }
  return absl::NotFoundError(absl::StrCat("no complete set of shard checkpoints in ", dir_));
}

}  // namespace syncopate::checkpoint
