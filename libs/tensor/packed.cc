#include "libs/tensor/packed.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/isa/isa.h"
#include "libs/tensor/reduction_kernels.h"

namespace syncopate::tensor {
namespace {

// The wire format is little-endian; a memcpy is only a correct encoder on a little-endian host.
static_assert(std::endian::native == std::endian::little,
              "PackFloats/UnpackFloatsInto assume a little-endian host");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);

// IEEE-754 binary32: a value is NaN or +-Inf exactly when all 8 exponent bits are set.
constexpr uint32_t kExponentMask = 0x7f800000u;

// Values scanned between early-exit checks: large enough for the OR-reduction to vectorise,
// small enough that a NaN near the front of a big gradient is found without reading all of it.
constexpr size_t kFiniteScanBlock = 1024;

bool BlockAllFinite(const float* values, size_t n) {
  uint32_t any_non_finite = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    any_non_finite |= static_cast<uint32_t>((bits & kExponentMask) == kExponentMask);
  }
  return any_non_finite == 0;
}

}  // namespace

// One copy: constructing the string from the bytes, rather than sizing it (which zero-fills)
// and copying in, saves a pass over every payload (memset was 2-3% of the default job's CPU).
std::string PackKeys(std::span<const uint64_t> keys) {
  return {reinterpret_cast<const char*>(keys.data()), keys.size_bytes()};
}

absl::Status UnpackKeys(std::string_view bytes, std::vector<uint64_t>& out) {
  if (bytes.size() % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes.size(), " key bytes are not a whole number of 8-byte keys"));
  }
  out.resize(bytes.size() / sizeof(uint64_t));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

std::string PackFloats(std::span<const float> values) { return std::string(PackedView(values)); }

absl::Status UnpackFloatsInto(std::string_view bytes, std::span<float> out) {
  return UnpackFloatsInto(ByteChunks{std::span<const char>(bytes.data(), bytes.size())}, out);
}

size_t TotalSize(const ByteChunks& chunks) {
  size_t size = 0;
  for (const std::span<const char> chunk : chunks) size += chunk.size();
  return size;
}

namespace {

// INVALID_ARGUMENT unless the pieces hold exactly out.size() floats.
absl::Status CheckPayloadSize(const ByteChunks& chunks, std::span<float> out) {
  if (const size_t size = TotalSize(chunks); size != out.size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("packed float payload has ", size,
                                                   " bytes, expected ", out.size_bytes(), " (",
                                                   out.size(), " floats)"));
  }
  return absl::OkStatus();
}

const ReductionKernels& ActiveReductionKernels() {
  static const ReductionKernels& kernels = ReductionKernelsFor(isa::ActiveIsaLevel());
  return kernels;
}

}  // namespace

absl::Status UnpackFloatsInto(const ByteChunks& chunks, std::span<float> out) {
  SYNCOPATE_RETURN_IF_ERROR(CheckPayloadSize(chunks, out));
  char* to = reinterpret_cast<char*>(out.data());
  for (const std::span<const char> chunk : chunks) {
    if (chunk.empty()) continue;
    std::memcpy(to, chunk.data(), chunk.size());
    to += chunk.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<double> UnpackFloatsAndSquaredNorm(const ByteChunks& chunks, std::span<float> out) {
  SYNCOPATE_RETURN_IF_ERROR(CheckPayloadSize(chunks, out));
  const ReductionKernels& kernels = ActiveReductionKernels();
  // Copied a few blocks at a time; each whole block is measured as soon as it is complete. The
  // blocks are the kernel's own (multiples of kReductionBlock from the start), added in order,
  // so the sum is bit for bit the kernel's over the whole array.
  constexpr size_t kPieceBytes = 4 * kReductionBlock * sizeof(float);
  char* const base = reinterpret_cast<char*>(out.data());
  size_t written = 0;   // bytes
  size_t measured = 0;  // floats
  double sum = 0;
  for (const std::span<const char> chunk : chunks) {
    for (size_t offset = 0; offset < chunk.size(); offset += kPieceBytes) {
      const size_t n = std::min(kPieceBytes, chunk.size() - offset);
      std::memcpy(base + written, chunk.data() + offset, n);
      written += n;
      while (measured + kReductionBlock <= written / sizeof(float)) {
        sum += kernels.squared_norm(out.data() + measured, kReductionBlock);
        measured += kReductionBlock;
      }
    }
  }
  if (measured < out.size()) {
    sum += kernels.squared_norm(out.data() + measured, out.size() - measured);
  }
  return sum;
}

bool AllFinite(std::span<const float> values) {
  for (size_t begin = 0; begin < values.size(); begin += kFiniteScanBlock) {
    const size_t n = std::min(kFiniteScanBlock, values.size() - begin);
    if (!BlockAllFinite(values.data() + begin, n)) return false;
  }
  return true;
}

double SquaredNorm(std::span<const float> values) {
  return ActiveReductionKernels().squared_norm(values.data(), values.size());
}

int64_t FirstNonFinite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace syncopate::tensor
