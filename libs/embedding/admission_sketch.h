// How often each key without an embedding row has been seen lately, in memory fixed in advance
// whatever the number of keys: the count behind feature admission (ADR 0010).
//
// A count-min sketch (Cormode & Muthukrishnan, "An improved data stream summary", 2005) of
// kDepth rows of kWidth one-byte saturating counters, each key mapped to one counter per row.
// The estimate, the smallest of a key's counters, never falls below the key's true count; other
// keys sharing its counters can only raise it (admit a key a sighting or two early, never late).
// Conservative update (Estan & Varghese, SIGCOMM 2002) raises only the counters at the minimum,
// which keeps that overestimate small. On an endless stream every counter would eventually
// saturate and admit everything, so the sketch ages as TinyLFU does (Einziger, Friedman & Manes,
// ACM TOS 2017): after kAgingPeriod additions every counter is halved. A key is therefore
// admitted once it has been seen about admit_after_count times within the last one or two
// periods, not ever: 2^17 sightings of keys without a row (only those are counted), which is
// ~20 updates of a 512-example batch of 26 fields on each of 2 shards, ~10k examples, if every
// key were new, and longer the more keys already have rows. The period is half the width, so before
// each halving the counters of a row hold at most 0.5 sightings of other keys on average; with 4
// rows a key seen c times reads as c + 1 with probability below 0.4^4 = 2.6%, and as c + 2 below
// 0.1%.
//
// Merging (restore onto another shard count): every shard uses the same hash functions, and a
// key is counted on exactly one shard, so the element-wise maximum of several shards' sketches
// is still at least every key's count: MergeMax keeps the count-min guarantee across
// re-sharding, at the price of the other shards' noise.
//
// Thread-safety: thread-compatible (const methods may run concurrently with each other).
#ifndef SYNCOPATE_LIBS_EMBEDDING_ADMISSION_SKETCH_H_
#define SYNCOPATE_LIBS_EMBEDDING_ADMISSION_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "syncopate/v1/checkpoint.pb.h"

namespace syncopate::embedding {

class AdmissionSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr int kWidth = 1 << 18;  // 1 MiB in all
  static constexpr int64_t kAgingPeriod = kWidth / 2;
  static constexpr int kMaxCount = 255;  // counters saturate here

  AdmissionSketch();

  // Counts one sighting of `key` and returns its estimated sightings so far (<= kMaxCount).
  int Add(uint64_t key);
  // The estimated sightings of `key`, without counting one.
  int Estimate(uint64_t key) const;

  // Checkpoints.
  v1::AdmissionSketchState State() const;
  // Takes the element-wise maximum with `state` (and the larger addition count). DATA_LOSS,
  // changing nothing, for a state of another shape.
  absl::Status MergeMax(const v1::AdmissionSketchState& state);

  int64_t memory_bytes() const { return static_cast<int64_t>(counters_.capacity()); }

 private:
  // The counter of `key` in each row.
  void Slots(uint64_t key, size_t (&slots)[kDepth]) const;
  void Age();

  std::vector<uint8_t> counters_;  // kDepth rows of kWidth, row-major
  int64_t additions_ = 0;          // since the last halving
};

}  // namespace syncopate::embedding

#endif  // SYNCOPATE_LIBS_EMBEDDING_ADMISSION_SKETCH_H_
