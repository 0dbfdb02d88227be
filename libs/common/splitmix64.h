// splitmix64's output function: the one fixed 64-bit mixer every deterministic derivation uses
// (initializer streams, embedding row streams, embedding row ownership), and DeriveSeed, the one
// way a seed is derived from a parent seed and a value.
// Thread-safety: a pure function; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_COMMON_SPLITMIX64_H_
#define SYNCOPATE_LIBS_COMMON_SPLITMIX64_H_

#include <cstdint>

namespace syncopate {

// Steele, Lea & Flood, "Fast splittable pseudorandom number generators" (OOPSLA 2014): a bijective
// mixer whose output passes BigCrush when fed a counter and spreads every input bit over the
// output. Fixed by its definition, unlike std::hash or absl::Hash, so every process, build and
// release computes the same value: results derived from it (initial weights, which shard owns an
// embedding row) may be persisted and compared across runs. Unsigned arithmetic only (wraps, no
// undefined behaviour).
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A child seed (or stream key) of `parent` for `value`: SplitMix64(parent ^ SplitMix64(value)).
// Mixing `value` before combining keeps (parent, value) pairs whose raw XOR would collide apart,
// and nearby values (epoch 0, 1, 2...; keys 1, 2, 3...) give unrelated children. Persisted
// results depend on it (initial weights, CTR keys, lease order): its definition never changes.
constexpr uint64_t DeriveSeed(uint64_t parent, uint64_t value) {
  return SplitMix64(parent ^ SplitMix64(value));
}

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_COMMON_SPLITMIX64_H_
