// What a launcher can see of its children from outside: their Prometheus endpoints (a bounded
// HTTP/1.0 GET on loopback) and their resident memory (/proc). Used by the soak driver and the
// integration tests.
// Thread-safety: free functions without shared state; thread-safe.
#ifndef SYNCOPATE_LIBS_LAUNCH_OBSERVE_H_
#define SYNCOPATE_LIBS_LAUNCH_OBSERVE_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::launch {

// Sends one HTTP/1.0 request line ("GET /metrics", "DELETE /metrics", ...) to 127.0.0.1:port and
// returns the whole reply (status line, headers, body). Connecting, sending and each read are
// bounded by `timeout`, so a stopped (SIGSTOPped, swapping) child cannot hang the caller.
absl::StatusOr<std::string> HttpRequest(int port, const std::string& request,
                                        absl::Duration timeout);

// The value of the first sample line of Prometheus text `text` that starts with `series` (the
// name plus its labels exactly as the exposition prints them, e.g.
// `syncopate_shard_version{shard="0"}`); nullopt if there is none.
std::optional<double> MetricValue(const std::string& text, const std::string& series);

// VmRSS of a process from /proc/<pid>/status, in bytes; NOT_FOUND once it is gone.
absl::StatusOr<int64_t> ResidentBytes(pid_t pid);

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_OBSERVE_H_
