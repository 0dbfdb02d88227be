#include "libs/isa/isa.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace syncopate::isa {

absl::string_view IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kBaseline:
      return "baseline";
    case IsaLevel::kV3:
      return "v3";
    case IsaLevel::kV4:
      return "v4";
  }
  return "unknown";
}

absl::StatusOr<IsaLevel> ParseIsaLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "baseline" || lower == "x86-64" || lower == "sse2") return IsaLevel::kBaseline;
  if (lower == "v3" || lower == "x86-64-v3" || lower == "avx2") return IsaLevel::kV3;
  if (lower == "v4" || lower == "x86-64-v4" || lower == "avx512") return IsaLevel::kV4;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ISA level '", name, "'; expected baseline, v3 or v4"));
}

IsaLevel HighestSupportedIsaLevel() {
#if defined(__x86_64__) && defined(SYNCOPATE_ISA_MULTI_LEVEL) && !defined(__clang__)
  // libgcc's checks include the OS's XCR0 state: a CPU with AVX-512 under a kernel that does not
  // save the zmm registers reports no x86-64-v4. GCC (12) only: clang 14 rejects the level names
  // ("invalid cpu feature string"), so clang builds (./dev fuzz, clang-tidy) run the baseline.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return IsaLevel::kV4;
  if (__builtin_cpu_supports("x86-64-v3")) return IsaLevel::kV3;
#endif
  return IsaLevel::kBaseline;
}

std::vector<IsaLevel> SupportedIsaLevels() {
  std::vector<IsaLevel> levels;
  const int highest = static_cast<int>(HighestSupportedIsaLevel());
  for (int level = 0; level <= highest; ++level) levels.push_back(static_cast<IsaLevel>(level));
  return levels;
}

absl::StatusOr<IsaLevel> ChooseIsaLevel(std::optional<absl::string_view> override_name,
                                        IsaLevel highest_supported) {
  if (!override_name.has_value() || override_name->empty()) return highest_supported;
  absl::StatusOr<IsaLevel> wanted = ParseIsaLevel(*override_name);
  if (!wanted.ok()) return wanted.status();
  if (*wanted > highest_supported) {
    return absl::FailedPreconditionError(
        absl::StrCat("ISA level ", IsaLevelName(*wanted),
                     " is not supported here (highest: ", IsaLevelName(highest_supported), ")"));
  }
  return *wanted;
}

IsaLevel ActiveIsaLevel() {
  static const IsaLevel active = [] {
    const char* env = std::getenv("SYNCOPATE_ISA");
    const IsaLevel highest = HighestSupportedIsaLevel();
    absl::StatusOr<IsaLevel> chosen = ChooseIsaLevel(
        env == nullptr ? std::nullopt : std::optional<absl::string_view>(env), highest);
    if (chosen.ok()) return *chosen;
    // Before logging is set up in some binaries, and never fatal: the fastest safe level still
    // computes the same results.
    std::fprintf(stderr, "SYNCOPATE_ISA ignored: %s; using %s\n",
                 std::string(chosen.status().message()).c_str(),
                 std::string(IsaLevelName(highest)).c_str());
    return highest;
  }();
  return active;
}

std::string IsaDescription(IsaLevel level) {
  absl::string_view detail = "x86-64, SSE2";
  if (level == IsaLevel::kV3) detail = "x86-64-v3, AVX2+FMA";
  if (level == IsaLevel::kV4) detail = "x86-64-v4, AVX-512";
  std::string supported;
  for (const IsaLevel l : SupportedIsaLevels()) absl::StrAppend(&supported, " ", IsaLevelName(l));
  return absl::StrCat("isa ", IsaLevelName(level), " (", detail, "; supported:", supported, ")");
}

std::string MachineDescription() {
  std::string cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      cpu = std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
    }
    break;
  }
  return absl::StrCat(cpu, ", ", std::thread::hardware_concurrency(), " cores, kernels ",
                      IsaDescription(ActiveIsaLevel()));
}

}  // namespace syncopate::isa
