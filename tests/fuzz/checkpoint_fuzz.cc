// Fuzz target: the checkpoint reader (checkpoint::ReadCheckpointFile) and what a shard does with
// what it reads (ShardCore::Restore). The first byte picks raw file bytes (the framing: magic,
// length, CRC) or a correctly framed arbitrary payload (the parser and Restore behind the CRC,
// which mutation alone would never get past). A refused restore must change nothing.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "libs/checkpoint/checkpoint_store.h"
#include "libs/common/clock.h"
#include "libs/shard/shard_core.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/small_assignment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in string fields is an expected parse failure; protobuf's log of each one
  // would dominate the run time.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  syncopate::fuzz::FuzzInput in(data, size);
  const uint8_t choice = in.Byte();
  const std::string bytes = in.Rest();
  static const std::string path =
      std::string(std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp") +
      "/syncopate-checkpoint-fuzz-" + std::to_string(getpid()) + ".ckpt";
  if (choice & 1) {
    if (!syncopate::checkpoint::WriteFramedFile(path, bytes).ok()) std::abort();
  } else {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  }
  absl::StatusOr<syncopate::v1::ShardCheckpoint> checkpoint =
      syncopate::checkpoint::ReadCheckpointFile(path);
  if (!checkpoint.ok()) {
    if (checkpoint.status().message().empty()) std::abort();
    return 0;
  }
  syncopate::FakeClock clock;
  absl::StatusOr<std::unique_ptr<syncopate::shard::ShardCore>> core =
      syncopate::shard::ShardCore::Create(
          syncopate::fuzz::SmallAssignment(syncopate::v1::MODE_SYNC, choice & 2), &clock, nullptr);
  if (!core.ok()) std::abort();
  const std::vector<float> before = (*core)->Parameters();
  const int64_t version = (*core)->Stats().version;
  absl::Status restored = (*core)->Restore({*checkpoint});
  if (!restored.ok()) {
    const std::vector<float> after = (*core)->Parameters();
    if (std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) != 0 ||
        (*core)->Stats().version != version) {
      std::abort();  // "nothing changed" is the contract of a refused restore
    }
  }
  return 0;
}
