#include "libs/embedding/admission_sketch.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "libs/common/splitmix64.h"

namespace syncopate::embedding {
namespace {

// The sketch's hash is DeriveSeed(kSalt, key), not SplitMix64(key): OwnerShard places keys by
// SplitMix64(key) mod S, so on one shard those hashes share their residue mod S and would fill
// only every S-th counter of a power-of-two row.
constexpr uint64_t kSalt = 0x61646d6974ull;  // "admit"

static_assert((AdmissionSketch::kWidth & (AdmissionSketch::kWidth - 1)) == 0,
              "the width is a power of two: slots are masked, not divided");

}  // namespace

AdmissionSketch::AdmissionSketch() : counters_(static_cast<size_t>(kDepth) * kWidth, 0) {}

void AdmissionSketch::Slots(uint64_t key, size_t (&slots)[kDepth]) const {
  // Kirsch & Mitzenmacher ("Less hashing, same performance", 2006): rows i = 0..d-1 take
  // h1 + i * h2 from one 64-bit hash, as good as d independent hashes for these sketches. An odd
  // h2 visits distinct slots of a power-of-two row.
  const uint64_t hash = DeriveSeed(kSalt, key);
  const uint64_t h1 = hash & 0xffffffffu;
  const uint64_t h2 = (hash >> 32) | 1;
  for (int i = 0; i < kDepth; ++i) {
    slots[i] = static_cast<size_t>(i) * kWidth + ((h1 + i * h2) & (kWidth - 1));
  }
}

int AdmissionSketch::Estimate(uint64_t key) const {
  size_t slots[kDepth];
  Slots(key, slots);
  int estimate = kMaxCount;
  for (const size_t slot : slots) estimate = std::min<int>(estimate, counters_[slot]);
  return estimate;
}

int AdmissionSketch::Add(uint64_t key) {
  size_t slots[kDepth];
  Slots(key, slots);
  int estimate = kMaxCount;
  for (const size_t slot : slots) estimate = std::min<int>(estimate, counters_[slot]);
  if (estimate < kMaxCount) {
    // Conservative update: only the counters at the minimum rise; the others already count the
    // key's sightings (and other keys') at least once more.
    for (const size_t slot : slots) {
      if (counters_[slot] == estimate) ++counters_[slot];
    }
    ++estimate;
  }
  if (++additions_ >= kAgingPeriod) Age();
  return estimate;
}

void AdmissionSketch::Age() {
  for (uint8_t& counter : counters_) counter >>= 1;
  additions_ = 0;
}

v1::AdmissionSketchState AdmissionSketch::State() const {
  v1::AdmissionSketchState state;
  state.set_depth(kDepth);
  state.set_width(kWidth);
  state.set_counters(std::string(counters_.begin(), counters_.end()));
  state.set_additions(additions_);
  return state;
}

absl::Status AdmissionSketch::MergeMax(const v1::AdmissionSketchState& state) {
  if (state.depth() != kDepth || state.width() != kWidth ||
      state.counters().size() != counters_.size() || state.additions() < 0) {
    return absl::DataLossError(absl::StrCat("admission sketch of ", state.depth(), " x ",
                                            state.width(), " with ", state.counters().size(),
                                            " counters, expected ", kDepth, " x ", kWidth));
  }
  for (size_t i = 0; i < counters_.size(); ++i) {
    counters_[i] = std::max(counters_[i], static_cast<uint8_t>(state.counters()[i]));
  }
  additions_ = std::min(kAgingPeriod - 1, std::max(additions_, state.additions()));
  return absl::OkStatus();
}

}  // namespace syncopate::embedding
