// x86-64 instruction-set levels for the hot kernels (the MLP's matrix products, the optimizers'
// update loops). The same kernel sources are compiled once per level (`-march=x86-64`,
// `x86-64-v3` = AVX2+FMA, `x86-64-v4` = AVX-512) into separate namespaces, and the process picks
// the best level its CPU supports at start (ADR 0008). The rest of the binary stays portable
// x86-64, so one image runs on any x86-64 machine.
// Thread-safety: every function is thread-safe; ActiveIsaLevel() decides once per process.
#ifndef SYNCOPATE_LIBS_ISA_ISA_H_
#define SYNCOPATE_LIBS_ISA_ISA_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace syncopate::isa {

// Ordered: a higher level implies every instruction of the lower ones.
enum class IsaLevel {
  kBaseline = 0,  // x86-64: SSE2, 128-bit vectors (what a build without -march uses)
  kV3 = 1,        // x86-64-v3: AVX2 + FMA, 256-bit vectors
  kV4 = 2,        // x86-64-v4: AVX-512 F/BW/CD/DQ/VL, 512-bit vectors
};

// The name the override and the logs use: "baseline", "v3" or "v4".
absl::string_view IsaLevelName(IsaLevel level);

// Parses IsaLevelName's names; also "x86-64", "x86-64-v3", "x86-64-v4", "avx2", "avx512".
// INVALID_ARGUMENT otherwise.
absl::StatusOr<IsaLevel> ParseIsaLevel(absl::string_view name);

// The highest level this build has kernels for that this CPU (and OS, for the AVX register
// state) can run. kBaseline on a build for another architecture.
IsaLevel HighestSupportedIsaLevel();

// Every level this process can run, lowest first (always starts with kBaseline).
std::vector<IsaLevel> SupportedIsaLevels();

// The level to use given an optional override (SYNCOPATE_ISA's value): the override if this
// CPU supports it, else the highest supported level. INVALID_ARGUMENT for an unknown name;
// FAILED_PRECONDITION when the override asks for a level this CPU cannot run (running it would
// die on an illegal instruction).
absl::StatusOr<IsaLevel> ChooseIsaLevel(std::optional<absl::string_view> override_name,
                                        IsaLevel highest_supported);

// The level every kernel table uses by default: decided on first call from the environment
// variable SYNCOPATE_ISA (tests and operators force a level with it) and the CPU. A bad override
// is reported once on stderr and ignored.
IsaLevel ActiveIsaLevel();

// "isa v4 (x86-64-v4, AVX-512; supported: baseline v3 v4)": the line processes log at start.
std::string IsaDescription(IsaLevel level);

// The machine a measurement ran on, for benchmarks' headers and results: "Intel(R) Xeon(R)
// Processor @ 2.50GHz, 2 cores, kernels isa v4 (x86-64-v4, AVX-512; supported: ...)". The CPU
// is /proc/cpuinfo's first "model name" ("unknown CPU" without one); cores are the CPUs this
// process may run on (std::thread::hardware_concurrency).
std::string MachineDescription();

}  // namespace syncopate::isa

#endif  // SYNCOPATE_LIBS_ISA_ISA_H_
