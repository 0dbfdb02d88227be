#include "libs/runtime/process_runtime.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): sigset_t, sigwait are POSIX
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "glog/logging.h"

namespace syncopate::runtime {
namespace {

absl::Notification& ShutdownNotification() {
  static absl::Notification* const kNotification = new absl::Notification();
  return *kNotification;
}

std::string& ProgramName() {
  static std::string* const kName = new std::string("syncopate");
  return *kName;
}

}  // namespace

// Every training step allocates and frees buffers of a shard's parameter slice (0.5-16 MiB: the
// packed pull and push payloads, gRPC's slices). With glibc's defaults the heap top above
// M_TRIM_THRESHOLD (twice the dynamic mmap threshold, ~1 MiB after the first such free) goes
// back to the kernel at every free and comes back as fresh zeroed pages at the next step: on the
// default job `perf record -a` put 10% of all CPU in page faults and clear_page, and the shards'
// RSS did not shrink for it (the next step needs the same bytes). Keeping freed memory in the
// heap removes the faults (14.3-15.0k -> 16.6k examples/s on the default job, 2026-11-27).
// Requests below the transport's 64 MiB message limit come from the heap, larger ones are mapped.
void KeepFreedMemoryForReuse() {
  constexpr int kMmapThresholdBytes = 64 << 20;
  constexpr int kTrimThresholdBytes = 512 << 20;
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
  // Kept for reuse, freed memory must be reusable by whichever thread allocates next. glibc gives
  // threads up to 8 arenas per core, each keeping its free chunks to itself, so a burst in one
  // (a rejoining worker's pulls on top of everyone else's) raised that arena's high-water mark
  // for good: the shards' RSS grew in steps, +3.6-8.2% in a 20-minute soak (2-core AMD EPYC,
  // 2026-11-29), and in a 10-minute one malloc_stats showed 16 arenas holding 17.5 -> 18.7 MB
  // for 8.2-10.4 MB live. Two arenas, whatever the core count (a bound that grew with the cores
  // would be no bound on a large machine): the 20-minute soak's shards then stayed within
  // -0.1..+4.8% (one arena: 28.6 MiB flat over 10 minutes), and the default job lost nothing
  // (examples/s against glibc's 16 arenas, 5 alternated runs paired, t 95%: x1.04 [1.01, 1.08]
  // with two, x1.02 [0.91, 1.12] with one).
  constexpr int kArenas = 2;
  mallopt(M_ARENA_MAX, kArenas);
}

// Kept for reuse between steps, not for good: every `period` the free pages of the heap go back
// to the kernel (malloc_trim(0) madvises them away; mid-soak it gave back 1.3 MB of a shard's
// 17 MB heap), and the steps after it fault back only what they use, once per period instead of
// at every free.
void TrimFreedMemoryEvery(absl::Duration period) {
  std::thread([period] {
    while (!WaitForShutdown(period)) malloc_trim(0);
  }).detach();
}

std::vector<char*> InitProcess(int argc, char** argv, const char* usage) {
  const char* slash = strrchr(argv[0], '/');
  ProgramName() = slash != nullptr ? slash + 1 : argv[0];

  // `--help` lists the flags of our own sources (absl's default matches only a file named after
  // the program).
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "services/") || absl::StrContains(file, "libs/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.normalize_filename = [](absl::string_view file) {
    size_t pos = file.find("services/");
    if (pos == absl::string_view::npos) pos = file.find("libs/");
    return std::string(pos == absl::string_view::npos ? file : file.substr(pos));
  };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);

  // Unknown flags and bad values end the process with one "ERROR: ..." line from Abseil. Asked
  // for help (--help, --helpfull, ...), the process prints it and exits 0, as every command a
  // user knows does; absl::ParseCommandLine would exit 1.
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) >= 0) {
    std::cout.flush();
    std::exit(0);
  }

  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  KeepFreedMemoryForReuse();
  // Debian builds Abseil without NDEBUG, so every Mutex acquisition also updates a global lock
  // graph for deadlock detection (GraphCycles: ~1.5% of the default job's CPU). The binaries
  // turn it off; unit tests and the sanitizer builds, which never call InitProcess, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Only the signal thread receives SIGTERM/SIGINT: threads created later inherit this mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    int received = 0;
    sigwait(&signals, &received);
    LOG(INFO) << "received " << strsignal(received) << ", shutting down";
    RequestShutdown();
  }).detach();
  signal(SIGPIPE, SIG_IGN);
  // Started after the mask above, like every later thread: SIGTERM must reach only the signal
  // thread (delivered to a thread that does not block it, it would end the process at once).
  // Often enough that a burst's memory is back within the soak's minute-long RSS windows, rarely
  // enough that it and the faults after it are noise (trimming a 54 MB heap of 16 arenas with
  // 13 MB live took 2 ms on a 2-core AMD EPYC).
  constexpr absl::Duration kTrimPeriod = absl::Seconds(30);
  TrimFreedMemoryEvery(kTrimPeriod);
  return positional;
}

bool WaitForShutdown(absl::Duration timeout) {
  return ShutdownNotification().WaitForNotificationWithTimeout(timeout);
}

bool ShutdownRequested() { return ShutdownNotification().HasBeenNotified(); }

void RequestShutdown() {
  static absl::once_flag once;
  absl::call_once(once, [] { ShutdownNotification().Notify(); });
}

absl::Status WriteKeyValueFile(const std::string& path,
                               const std::map<std::string, std::string>& values) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
    for (const auto& [key, value] : values) out << key << "=" << value << "\n";
    if (!out.flush()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ReadKeyValueFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::map<std::string, std::string> values;
  std::string line;
  while (std::getline(in, line)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (!kv.first.empty()) values[kv.first] = kv.second;
  }
  return values;
}

std::string ExecutableDir() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "." : self.parent_path().string();
}

void Die(const std::string& message, int code) {
  fprintf(stderr, "%s: %s\n", ProgramName().c_str(), message.c_str());
  fflush(stderr);
  // Kubernetes' terminationMessagePath exists inside the container; never create it elsewhere.
  // Only the container's main process (PID 1: the chart starts the binary without a shell or
  // init) writes it: an exec probe (`syncopate health`) or a `kubectl exec` command that fails
  // while the main process exits would otherwise replace the main process's message with its
  // own (kube_node_test saw the coordinator's summary replaced by a probe's "connection refused").
  const char* path = std::getenv(kTerminationLogEnv);
  std::error_code error;
  if (path == nullptr && getpid() == 1 && std::filesystem::exists("/dev/termination-log", error)) {
    path = "/dev/termination-log";
  }
  if (path != nullptr && *path != '\0') {
    if (FILE* log = std::fopen(path, "w")) {
      fprintf(log, "%s: %s\n", ProgramName().c_str(), message.c_str());
      std::fclose(log);
    }
  }
  std::_Exit(code);
}

}  // namespace syncopate::runtime
