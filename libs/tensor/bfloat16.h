// bfloat16 on the wire: the dense parameters and gradients in half the bytes (issue 32). A
// bfloat16 is the top 16 bits of a float32 (same sign and 8-bit exponent, 7 mantissa bits), so the
// conversion is a rounding shift, the range is float32's, and only precision is lost: a relative
// error of at most 2^-8 per value. Shards keep float32 state; only transfers are rounded.
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_TENSOR_BFLOAT16_H_
#define SYNCOPATE_LIBS_TENSOR_BFLOAT16_H_

#include <bit>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "libs/tensor/packed.h"

namespace syncopate::tensor {

// `value` rounded to the nearest bfloat16 (ties to even); a NaN stays a (quiet) NaN, +-Inf stay.
// Branch-free (a select), so the packing loops vectorise.
inline uint16_t ToBfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float FromBfloat16(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// `values` as little-endian bfloat16, 2 bytes each, in order. With `residual` (the same size),
// error feedback: what is encoded is values + residual, and residual keeps what the rounding lost
// (Seide et al. 2014, "1-bit SGD"; Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"), so
// over many pushes the sum of what was sent tracks the sum of the gradients instead of drifting
// by the rounding's bias. A non-finite value leaves its residual 0 (the receiver rejects it).
std::string PackBfloat16(std::span<const float> values, std::span<float> residual = {});

// Inverse of PackBfloat16, for bytes in pieces (a value may straddle two). INVALID_ARGUMENT,
// leaving `out` untouched, unless the pieces hold exactly 2 * out.size() bytes.
absl::Status UnpackBfloat16Into(const ByteChunks& chunks, std::span<float> out);

}  // namespace syncopate::tensor

#endif  // SYNCOPATE_LIBS_TENSOR_BFLOAT16_H_
