#include "libs/tensor/initializer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "libs/common/splitmix64.h"
#include "libs/common/status_macros.h"

namespace syncopate::tensor {
namespace {

using ::syncopate::v1::Initializer;

// 64-bit FNV-1a. Fixed by its definition, unlike std::hash, so every process and every build
// derives the same stream for a tensor name.
uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// The counter base of the tensor's (or table's) splitmix64 sequence. Mixing the name hash before
// combining it with the seed keeps (seed, name) pairs whose raw XOR would collide from sharing a
// stream.
uint64_t StreamKey(uint64_t seed, std::string_view name) { return DeriveSeed(seed, Fnv1a64(name)); }

// Fills `out` with U(-limit, +limit) draws: element i is SplitMix64(stream + first + i), i.e.
// position first + i of a splitmix64 sequence keyed by `stream`. Unsigned arithmetic: wraps.
void FillUniform(uint64_t stream, uint64_t first, double limit, std::span<float> out) {
  // 24 random bits fill a float mantissa exactly: unit is in [0, 1) with spacing 2^-24.
  constexpr double kTwoToMinus24 = 1.0 / 16777216.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = SplitMix64(stream + first + i);
    const double unit = static_cast<double>(bits >> 40) * kTwoToMinus24;
    out[i] = static_cast<float>((2.0 * unit - 1.0) * limit);
  }
}

absl::Status RequirePositiveFan(const Initializer& init, const char* field, int64_t fan,
                                std::string_view tensor_name) {
  if (fan > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("initializer ", Initializer::Kind_Name(init.kind()), " of tensor '",
                   std::string(tensor_name), "' needs ", field, " > 0, got ", fan));
}

// The bound `limit` of a uniform kind's U(-limit, +limit); 0 for ZEROS.
absl::StatusOr<double> UniformLimit(const Initializer& init, std::string_view tensor_name) {
  switch (init.kind()) {
    case Initializer::ZEROS:
      return 0.0;
    case Initializer::HE_UNIFORM:
      // He et al., "Delving Deep into Rectifiers" (2015): Var = 2/fan_in keeps ReLU activations'
      // scale across layers; U(-a, a) has variance a^2/3, so a = sqrt(6/fan_in).
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_in", init.fan_in(), tensor_name));
      return std::sqrt(6.0 / static_cast<double>(init.fan_in()));
    case Initializer::GLOROT_UNIFORM:
      // Glorot & Bengio (2010): Var = 2/(fan_in+fan_out), hence a = sqrt(6/(fan_in+fan_out)).
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_in", init.fan_in(), tensor_name));
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_out", init.fan_out(), tensor_name));
      return std::sqrt(6.0 / static_cast<double>(init.fan_in() + init.fan_out()));
    case Initializer::UNIFORM:
      if (!(init.scale() > 0) || !std::isfinite(init.scale())) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer UNIFORM of tensor '", std::string(tensor_name),
                         "' needs a finite scale > 0, got ", init.scale()));
      }
      return init.scale();
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", std::string(tensor_name),
                                                     "' has no usable initializer kind (",
                                                     static_cast<int>(init.kind()), ")"));
  }
}

// Fills `out` from position `first` of `stream`'s sequence, or with zeros.
void Fill(const Initializer& init, double limit, uint64_t stream, uint64_t first,
          std::span<float> out) {
  if (init.kind() == Initializer::ZEROS) {
    std::fill(out.begin(), out.end(), 0.0f);
  } else {
    FillUniform(stream, first, limit, out);
  }
}

}  // namespace

absl::Status InitializeSlice(const Initializer& init, uint64_t seed, std::string_view tensor_name,
                             int64_t tensor_offset, std::span<float> out) {
  if (tensor_offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "negative offset ", tensor_offset, " into tensor '", std::string(tensor_name), "'"));
  }
  SYNCOPATE_ASSIGN_OR_RETURN(const double limit, UniformLimit(init, tensor_name));
  Fill(init, limit, StreamKey(seed, tensor_name), static_cast<uint64_t>(tensor_offset), out);
  return absl::OkStatus();
}

absl::Status InitializeRow(const Initializer& init, uint64_t seed, std::string_view table_name,
                           uint64_t key, std::span<float> out) {
  SYNCOPATE_ASSIGN_OR_RETURN(const double limit, UniformLimit(init, table_name));
  // Each row gets its own stream base, a mix of the table's stream and the key: rows of nearby
  // keys (1, 2, 3...) are unrelated, and element j of a row is position j of that stream.
  Fill(init, limit, DeriveSeed(StreamKey(seed, table_name), key), 0, out);
  return absl::OkStatus();
}

}  // namespace syncopate::tensor
