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
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace syncopate::checkpoint {
namespace {

constexpr char kMagic[8] = {'S', 'Y', 'N', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint64_t);
constexpr size_t kTrailerBytes = sizeof(uint32_t);

uint32_t Crc32(const std::string& data) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", path, ": ", strerror(errno)));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("fsync ", path, ": ", strerror(errno)));
  return absl::OkStatus();
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

}  // namespace

absl::Status WriteFramedFile(const std::string& path, const std::string& payload) {
  const uint64_t length = payload.size();
  const uint32_t crc = Crc32(payload);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
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
  // Durable before visible: data, then the rename, then the directory entry.
  absl::Status synced = FsyncPath(tmp, O_RDONLY);
  if (!synced.ok()) return synced;
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("rename ", tmp, " -> ", path, ": ", strerror(errno)));
  }
  return FsyncPath(std::filesystem::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
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
  std::string payload;
  if (!checkpoint.SerializeToString(&payload)) {
    return absl::InternalError("cannot serialize the checkpoint");
  }
  return WriteFramedFile(path, payload);
}

absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path) {
  absl::StatusOr<std::string> payload = ReadFramedFile(path);
  if (!payload.ok()) {
    return absl::Status(payload.status().code(),
                        absl::StrCat("checkpoint ", payload.status().message()));
  }
  v1::ShardCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(*payload)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " does not parse"));
  }
  return checkpoint;
}

absl::Status CheckpointStore::Save(const v1::ShardCheckpoint& checkpoint) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir_, ": ", error.message()));
  }
  const std::string path =
      absl::StrFormat("%s/shard-%d-of-%d-v%012d.ckpt", dir_, checkpoint.shard_id(),
                      checkpoint.num_shards(), checkpoint.version());
  absl::Status written = WriteCheckpointFile(path, checkpoint);
  if (!written.ok()) return written;
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

}  // namespace syncopate::checkpoint
