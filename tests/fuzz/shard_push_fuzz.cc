// Fuzz target: a shard's push handling (ShardCore::Push) with arbitrary PushRequest bytes and
// fields, interleaved with pulls, membership changes and mode switches, on a small assignment.
// Checks the shard's promise: a rejected push changes nothing, every push gets one outcome.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "libs/common/clock.h"
#include "libs/shard/shard_core.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/small_assignment.h"

namespace {

using syncopate::FakeClock;
using syncopate::fuzz::FuzzInput;
using syncopate::shard::ShardCore;
namespace v1 = syncopate::v1;

constexpr v1::Mode kModes[] = {v1::MODE_SYNC, v1::MODE_GBA, v1::MODE_ASYNC, v1::MODE_UNSPECIFIED,
                               v1::MODE_AUTO};

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FakeClock clock;
  const uint8_t choice = in.Byte();
  absl::StatusOr<std::unique_ptr<ShardCore>> created = ShardCore::Create(
      syncopate::fuzz::SmallAssignment(kModes[(choice >> 1) % 3], choice & 1), &clock, nullptr);
  Check(created.ok());
  ShardCore& core = **created;
  int owner = 0;
  int64_t pushes = 0;
  int64_t generation = 1;
  for (int op = 0; op < 64 && !in.empty(); ++op) {
    const uint8_t kind = in.Byte();
    const int32_t worker = static_cast<int32_t>(in.Byte() % 4);  // 0 and 3 are strangers
    v1::PushRequest push;
    switch (kind % 6) {
      case 0:  // raw bytes as the wire would deliver them
        if (!push.ParseFromString(in.Bytes(64))) continue;
        break;
      case 1:
      case 2: {  // well-formed fields with fuzzed values; a right-sized gradient half the time
        push.set_request_id(in.Int64());
        push.set_token(kind % 6 == 1 ? in.Byte() % 8 : in.Int64());
        push.set_samples(kind % 6 == 1 ? in.Byte() % 5 : in.Int64());
        std::string gradient = in.Bytes(32);
        if (kind & 0x80) gradient.resize(4 * sizeof(float));
        push.set_gradient(gradient);
        if (kind & 0x40) {  // embedding rows: fuzzed table, keys and values
          v1::SparseRows* rows = push.add_sparse();
          rows->set_table(static_cast<int32_t>(in.Byte() % 3) - 1);
          rows->set_keys(in.Bytes(24));
          rows->set_values(in.Bytes(48));
        }
        break;
      }
      case 3: {
        v1::PullRequest pull;
        pull.set_request_id(in.Int64());
        pull.set_min_version(in.Byte() % 8);
        if (kind & 0x40) {
          v1::SparseRows* rows = pull.add_sparse();
          rows->set_table(static_cast<int32_t>(in.Byte() % 3) - 1);
          rows->set_keys(in.Bytes(24));
        }
        (void)core.Pull({&owner, 0, (kind & 0x80) != 0}, pull,
                        [](const syncopate::shard::PullReply&) {});
        continue;
      }
      case 4: {
        v1::Membership m;
        m.set_generation(++generation);
        const int members = in.Byte() % 4;
        for (int i = 0; i < members; ++i) m.add_worker_ids(in.Byte() % 4);
        m.set_local_batch(static_cast<int8_t>(in.Byte()));
        core.SetMembership(m);
        continue;
      }
      default:
        core.SetMode(kModes[in.Byte() % 5]);
        clock.Advance(absl::Milliseconds(in.Byte()));
        continue;
    }
    const std::vector<float> before = core.Parameters();
    const v1::PushAck ack = core.Push(worker, push);
    ++pushes;
    if (ack.outcome() == v1::PUSH_REJECTED) {
      Check(ack.code() != 0);
      const std::vector<float> after = core.Parameters();
      Check(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
    } else {
      Check(ack.code() == 0);
    }
  }
  const syncopate::shard::ShardStats stats = core.Stats();
  Check(stats.gradients.applied() + stats.gradients.decayed() + stats.gradients.dropped() +
            stats.gradients.rejected() <=
        pushes);
  core.CancelPulls(&owner);
  return 0;
}
