// What every Syncopate binary does at start and at stop: parse flags (a bad flag is one clear
// line and a non-zero exit), set up logging, turn SIGTERM/SIGINT into an orderly shutdown, and
// publish the ports it bound in a ready file for launchers.
// Thread-safety: InitProcess must run first, in main, before any thread starts (it blocks the
// shutdown signals so that only the dedicated signal thread receives them). The rest is
// thread-safe.
#ifndef SYNCOPATE_LIBS_RUNTIME_PROCESS_RUNTIME_H_
#define SYNCOPATE_LIBS_RUNTIME_PROCESS_RUNTIME_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::runtime {

// Parses flags and returns the positional arguments (argv[0] first).
std::vector<char*> InitProcess(int argc, char** argv, const char* usage);

// Tunes glibc's allocator to keep freed memory for reuse instead of returning it to the kernel
// at every free, from two arenas so any thread reuses it (InitProcess calls it; so do
// benchmarks that host the services in process). Call it before the process starts threads.
void KeepFreedMemoryForReuse();
// Returns the heap's free pages to the kernel every `period` until shutdown is requested, from a
// thread of its own (InitProcess calls it, after blocking SIGTERM and SIGINT so that its thread
// never receives them): kept for reuse between steps, not for good.
void TrimFreedMemoryEvery(absl::Duration period);

// Blocks until SIGTERM/SIGINT arrives or RequestShutdown() is called, or `timeout` passes.
// Returns true once shutdown was requested.
bool WaitForShutdown(absl::Duration timeout = absl::InfiniteDuration());
bool ShutdownRequested();
void RequestShutdown();

// Writes `key=value` lines atomically (temp file + rename) so a reader never sees half a file.
absl::Status WriteKeyValueFile(const std::string& path,
                               const std::map<std::string, std::string>& values);
absl::StatusOr<std::map<std::string, std::string>> ReadKeyValueFile(const std::string& path);

// The directory of the running executable (where the sibling Syncopate binaries are installed).
std::string ExecutableDir();

// The environment variable naming the file a process writes its fatal one-line reason to (Die):
// `syncopate local` gives each child its own and prints the line; Kubernetes reads
// /dev/termination-log, written when it exists, the variable is unset and this process is the
// container's main process (PID 1), into the pod's status.
inline constexpr char kTerminationLogEnv[] = "SYNCOPATE_TERMINATION_LOG";

// The exit code of a permanent refusal: the coordinator refused this process (a wrong join
// token, another job, a shard id outside the job, any answer to its hello that the retry policy,
// rpc::IsRetryable, calls permanent) or a shard cannot adopt the job it was assigned. Restarting
// the process with the same flags meets the same answer. It has a code of its own so that a batch
// system can tell it from exit 1, the failures a new process may get past (a spent join budget, a
// worker that gave up rejoining, a port that cannot be bound); 2 is a start-up check (Die's
// default). The Helm chart's podFailurePolicy fails a Job on 2 and 3 and leaves 1 to its retries
// (helm/syncopate/values.yaml; the table in docs/operations.md, "Running a cluster by hand").
inline constexpr int kExitRefused = 3;

// A parameter shard superseded by another process of the same shard id (checkpoint/shard_claim.h:
// this one was frozen or cut off with its node and replaced). Not a failure of the job, and not
// a completion: the chart's podFailurePolicy ignores it.
inline constexpr int kExitSuperseded = 4;

// A parameter shard stopped (SIGTERM, SIGINT) before its job ended: 128 + SIGTERM, what a shell
// reports for a process the signal killed. Not 0, because a shard's Job counts a pod that exits 0
// as its completion: a shard evicted by a drain or a lost node would end its Job while its
// replacement restores, and the Job controller would delete the replacement as surplus (ADR 0006).
inline constexpr int kExitInterrupted = 143;

// Prints "<program>: <message>" to stderr, writes the same line to the termination log (above)
// and exits with `code` (2: bad flags, bad job specs; kExitRefused: a permanent refusal; 1: any
// other failure).
[[noreturn]] void Die(const std::string& message, int code = 2);

}  // namespace syncopate::runtime

#endif  // SYNCOPATE_LIBS_RUNTIME_PROCESS_RUNTIME_H_
