// Dense float tensors on the wire: packing into protobuf `bytes` and validating what arrives.
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_TENSOR_PACKED_H_
#define SYNCOPATE_LIBS_TENSOR_PACKED_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::tensor {

// The values as little-endian IEEE-754 float32, 4 bytes each, in order.
std::string PackFloats(std::span<const float> values);

// The same bytes without copying: a view of the values' own memory (the host is little-endian:
// packed.cc asserts it).
inline std::string_view PackedView(std::span<const float> values) {
  return {reinterpret_cast<const char*>(values.data()), values.size_bytes()};
}

// Inverse of PackFloats. INVALID_ARGUMENT, leaving `out` untouched, unless
// bytes.size() == 4 * out.size(): a wrong-sized payload means sender and receiver disagree on the
// layout, and silently truncating it would corrupt parameters.
absl::Status UnpackFloatsInto(std::string_view bytes, std::span<float> out);

// Bytes that arrived in pieces, in order: the slices a received message came in
// (rpc::ReceivedPayload). Views: whoever owns the bytes must outlive them.
using ByteChunks = std::vector<std::span<const char>>;

size_t TotalSize(const ByteChunks& chunks);

// UnpackFloatsInto for bytes in pieces: one copy, piece after piece (a float may straddle two
// pieces: the copy is of bytes into the floats' little-endian representation).
absl::Status UnpackFloatsInto(const ByteChunks& chunks, std::span<float> out);

// UnpackFloatsInto and then SquaredNorm(out), in one pass over memory: each reduction block is
// measured right after it is copied, while it is still in cache (a read pass of the payload
// fewer per push). Returns exactly SquaredNorm(out), however the bytes were cut.
absl::StatusOr<double> UnpackFloatsAndSquaredNorm(const ByteChunks& chunks, std::span<float> out);

// Embedding keys on the wire: little-endian uint64, 8 bytes each, in order.
std::string PackKeys(std::span<const uint64_t> keys);

// Inverse of PackKeys; resizes `out`. INVALID_ARGUMENT, leaving `out` untouched, unless
// bytes.size() is a multiple of 8.
absl::Status UnpackKeys(std::string_view bytes, std::vector<uint64_t>& out);

// True when no value is NaN or +-Inf. Meant for every gradient a shard receives, so it is a
// branch-free scan over the exponent bits.
bool AllFinite(std::span<const float> values);

// Σ x², returned in double. It is finite exactly when every value is: a finite float squares
// to at most ~1.2e77, so no sum of finitely many of them overflows a double, while NaN and ±Inf
// propagate. One pass therefore both validates a gradient and measures it (the shard's sync
// pushes, GradientStatistics). Runs the active ISA level's kernel, which sums blocks in float
// lanes (relative error <= ~2e-6; libs/tensor/reduction_kernels.h).
double SquaredNorm(std::span<const float> values);

// Index of the first NaN or +-Inf, or -1 when all values are finite. For error messages: slower
// than AllFinite, call it only once AllFinite has said no.
int64_t FirstNonFinite(std::span<const float> values);

}  // namespace syncopate::tensor

#endif  // SYNCOPATE_LIBS_TENSOR_PACKED_H_
