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

namespace {

using syncopate::FakeClock;
using syncopate::fuzz::FuzzInput;
using syncopate::shard::ShardCore;
namespace v1 = syncopate::v1;

constexpr v1::Mode kModes[] = {v1::MODE_SYNC, v1::MODE_GBA, v1::MODE_ASYNC, v1::MODE_UNSPECIFIED,
                               v1::MODE_AUTO};

// The shard owns flat [10, 14) of tensors "w" (3) and "b" (1); G = 4; workers 1 and 2.
v1::ShardAssignment Assignment(uint8_t choice) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.mutable_optimizer()->set_kind((choice & 1) ? v1::OptimizerSpec::MOMENTUM
                                                 : v1::OptimizerSpec::SGD);
  job.mutable_optimizer()->set_learning_rate(0.5f);
  job.mutable_optimizer()->set_momentum(0.9f);
  job.set_global_batch(4);
  job.set_num_workers(2);
  job.set_num_shards(2);
  const v1::Mode mode = kModes[(choice >> 1) % 3];
  job.set_mode(mode);
  job.set_seed(7);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_shard_id(1);
  p.set_flat_begin(10);
  p.set_flat_end(14);
  for (auto [tensor, offset, length] : {std::tuple{"w", 10, 3}, std::tuple{"b", 13, 1}}) {
    v1::TensorSlice* slice = p.add_slices();
    slice->set_tensor(tensor);
    slice->set_flat_offset(offset);
    slice->set_length(length);
    slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  }
  v1::Membership& m = *a.mutable_membership();
  m.set_generation(1);
  m.add_worker_ids(1);
  m.add_worker_ids(2);
  m.set_local_batch(2);
  a.set_mode(mode);
  return a;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<ShardCore>> created =
      ShardCore::Create(Assignment(in.Byte()), &clock, nullptr);
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
        break;
      }
      case 3:
        core.Pull(&owner, in.Int64(), in.Byte() % 8, [](v1::PullResponse) {});
        continue;
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
  Check(stats.applied + stats.decayed + stats.dropped + stats.rejected <= pushes);
  core.CancelPulls(&owner);
  return 0;
}
