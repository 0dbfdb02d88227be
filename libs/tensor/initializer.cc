#include "libs/tensor/initializer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"

namespace syncopate::tensor {
namespace {

using ::syncopate::v1::Initializer;

// splitmix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective mixer whose output passes BigCrush when fed a counter.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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

// Fills `out` with U(-limit, +limit) draws for elements [tensor_offset, ...). Element i's draw is
// SplitMix64(stream_key + i), i.e. position i of a splitmix64 sequence keyed by (seed, name).
void FillUniform(uint64_t seed, std::string_view tensor_name, int64_t tensor_offset, double limit,
                 std::span<float> out) {
  // Mixing the name hash before combining it with the seed keeps (seed, name) pairs whose raw
  // XOR would collide from sharing a stream.
  const uint64_t stream_key = SplitMix64(seed ^ SplitMix64(Fnv1a64(tensor_name)));
  // 24 random bits fill a float mantissa exactly: unit is in [0, 1) with spacing 2^-24.
  constexpr double kTwoToMinus24 = 1.0 / 16777216.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = SplitMix64(stream_key + static_cast<uint64_t>(tensor_offset) + i);
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

}  // namespace

absl::Status InitializeSlice(const Initializer& init, uint64_t seed, std::string_view tensor_name,
                             int64_t tensor_offset, std::span<float> out) {
  if (tensor_offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "negative offset ", tensor_offset, " into tensor '", std::string(tensor_name), "'"));
  }
  switch (init.kind()) {
    case Initializer::ZEROS:
      std::fill(out.begin(), out.end(), 0.0f);
      return absl::OkStatus();
    case Initializer::HE_UNIFORM: {
      // He et al., "Delving Deep into Rectifiers" (2015): Var = 2/fan_in keeps ReLU activations'
      // scale across layers; U(-a, a) has variance a^2/3, so a = sqrt(6/fan_in).
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_in", init.fan_in(), tensor_name));
      FillUniform(seed, tensor_name, tensor_offset,
                  std::sqrt(6.0 / static_cast<double>(init.fan_in())), out);
      return absl::OkStatus();
    }
    case Initializer::GLOROT_UNIFORM: {
      // Glorot & Bengio (2010): Var = 2/(fan_in+fan_out), hence a = sqrt(6/(fan_in+fan_out)).
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_in", init.fan_in(), tensor_name));
      SYNCOPATE_RETURN_IF_ERROR(RequirePositiveFan(init, "fan_out", init.fan_out(), tensor_name));
      FillUniform(seed, tensor_name, tensor_offset,
                  std::sqrt(6.0 / static_cast<double>(init.fan_in() + init.fan_out())), out);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", std::string(tensor_name),
                                                     "' has no usable initializer kind (",
                                                     static_cast<int>(init.kind()), ")"));
  }
}

}  // namespace syncopate::tensor
