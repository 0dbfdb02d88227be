#include "libs/tensor/bfloat16.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace syncopate::tensor {

static_assert(std::endian::native == std::endian::little, "the wire is little-endian");

std::string PackBfloat16(std::span<const float> values, std::span<float> residual) {
  std::string bytes(values.size() * sizeof(uint16_t), '\0');
  auto* out = reinterpret_cast<uint16_t*>(bytes.data());
  if (residual.empty()) {
    for (size_t i = 0; i < values.size(); ++i) out[i] = ToBfloat16(values[i]);
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const float wanted = values[i] + residual[i];
    out[i] = ToBfloat16(wanted);
    const float lost = wanted - FromBfloat16(out[i]);
    // lost - lost is 0 for a finite value and NaN otherwise: a branch-free isfinite.
    residual[i] = lost - lost == 0.0f ? lost : 0.0f;
  }
  return bytes;
}

absl::Status UnpackBfloat16Into(const ByteChunks& chunks, std::span<float> out) {
  if (const size_t size = TotalSize(chunks); size != out.size() * sizeof(uint16_t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed bfloat16 payload has ", size, " bytes, expected ",
                     out.size() * sizeof(uint16_t), " (", out.size(), " values)"));
  }
  size_t next = 0;        // the value being filled
  unsigned char low = 0;  // its first byte, when a piece ended between its two bytes
  bool have_low = false;
  for (const std::span<const char> chunk : chunks) {
    size_t offset = 0;
    if (have_low && !chunk.empty()) {
      const auto high = static_cast<unsigned char>(chunk[0]);
      out[next++] = FromBfloat16(static_cast<uint16_t>(low | (high << 8)));
      have_low = false;
      offset = 1;
    }
    const size_t whole = (chunk.size() - offset) / sizeof(uint16_t);
    for (size_t k = 0; k < whole; ++k) {
      uint16_t bits;
      std::memcpy(&bits, chunk.data() + offset + 2 * k, sizeof(bits));
      out[next++] = FromBfloat16(bits);
    }
    offset += 2 * whole;
    if (offset < chunk.size()) {
      low = static_cast<unsigned char>(chunk[offset]);
      have_low = true;
    }
  }
  return absl::OkStatus();
}

}  // namespace syncopate::tensor
