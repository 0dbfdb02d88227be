#include "libs/datagen/teacher_config.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace syncopate::datagen {

absl::Status ValidateCtrTeacherConfig(const CtrTeacherConfig& c) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("CTR teacher: ", what));
  };
  if (!(c.positive_rate > 0 && c.positive_rate < 1)) return bad("positive_rate must be in (0, 1)");
  if (!(c.signal_scale >= 0 && std::isfinite(c.signal_scale))) {
    return bad("signal_scale must be finite and >= 0");
  }
  if (!(c.zipf_exponent > 0 && c.zipf_exponent <= 10)) {
    return bad("zipf_exponent must be in (0, 10]");
  }
  if (c.min_vocabulary < 1 || c.max_vocabulary < c.min_vocabulary ||
      c.max_vocabulary > (int64_t{1} << 31)) {
    return bad("vocabularies must satisfy 1 <= min_vocabulary <= max_vocabulary <= 2^31");
  }
  if (!(c.rare_rank > 0)) return bad("rare_rank must be > 0");
  if (c.num_interactions < 0 || c.num_interactions > 5) return bad("num_interactions must be 0..5");
  if (!(c.interaction_scale >= 0 && std::isfinite(c.interaction_scale))) {
    return bad("interaction_scale must be finite and >= 0");
  }
  if (!(c.numeric_scale >= 0 && std::isfinite(c.numeric_scale))) {
    return bad("numeric_scale must be finite and >= 0");
  }
  if (!(c.cold_start_scale >= 0 && std::isfinite(c.cold_start_scale))) {
    return bad("cold_start_scale must be finite and >= 0");
  }
  if (!(c.numeric_zero_rate >= 0 && c.numeric_zero_rate < 1)) {
    return bad("numeric_zero_rate must be in [0, 1)");
  }
  return absl::OkStatus();
}

CtrTeacherConfig LongTailTeacherConfig(uint64_t teacher_seed) {
  return {.kind = CtrTeacherKind::kSegments,
          .teacher_seed = teacher_seed,
          .signal_scale = 0.22,
          .zipf_exponent = 1.05,
          .max_vocabulary = 200000,
          .numeric_scale = 1.5,
          .cold_start_scale = 1.0};
}

CtrTeacherConfig HeavyTailTeacherConfig(uint64_t teacher_seed) {
  CtrTeacherConfig config = LongTailTeacherConfig(teacher_seed);
  config.numeric_zero_rate = 0.35;
  return config;
}

}  // namespace syncopate::datagen
