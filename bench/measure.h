// How the ratio benchmarks (syncopate-perf-bench, syncopate-torch-bench) time and fail: a side of
// a ratio is run for a fixed time and reported per call, a figure is the median over rounds, and
// a set-up error ends the program with one line.
// Thread-safety: free functions; thread-safe.
#ifndef SYNCOPATE_BENCH_MEASURE_H_
#define SYNCOPATE_BENCH_MEASURE_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace syncopate::bench {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Runs `op` repeatedly for at least `seconds` (and at least twice); returns seconds per call.
inline double SecondsPerCall(const std::function<void()>& op, double seconds) {
  op();  // warm caches, connections and allocations outside the timed part
  int64_t calls = 0;
  const absl::Time start = absl::Now();
  absl::Duration elapsed;
  do {
    op();
    ++calls;
    elapsed = absl::Now() - start;
  } while (calls < 2 || elapsed < absl::Seconds(seconds));
  return absl::ToDoubleSeconds(elapsed) / static_cast<double>(calls);
}

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Die(absl::StrCat(what, ": ", value.status().ToString()));
  return *std::move(value);
}

inline void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) Die(absl::StrCat(what, ": ", status.ToString()));
}

}  // namespace syncopate::bench

#endif  // SYNCOPATE_BENCH_MEASURE_H_
