// The soak's arithmetic and verdicts (issue 16 item 5), apart from the cluster that produces the
// samples, so they can be tested on canned timelines (tests/unit/bench).
//
// The soak samples, about once a second: the resident memory of the coordinator and of each
// shard, each shard's version, and each shard's rejection counters by reason. From those:
//   RSS growth   mean RSS over the last `window` of the run / mean RSS over the first `window`
//                after warm-up, minus 1 (a mean, not two single samples: allocator arenas and
//                gRPC buffers make RSS jitter by a few hundred KiB from one second to the next);
//   stall        the longest time a shard's version did not advance, from its first update to
//                the end of the run (the sampling period is the resolution);
//   rejections   each counter's increase between two samples is "explained" when its reason is
//                one a worker kill causes and the interval overlaps the window after a kill;
//                any other increase is unexplained and fails the soak.
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_BENCH_SOAK_REPORT_H_
#define SYNCOPATE_BENCH_SOAK_REPORT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace syncopate::bench {

struct SoakSample {
  absl::Duration at;  // since the soak started
  // Process name ("coordinator", "shard-0", ...) -> VmRSS bytes; absent if it could not be read.
  std::map<std::string, int64_t> rss;
  // Shard name -> syncopate_shard_version; absent if the scrape failed.
  std::map<std::string, double> versions;
  // (shard name, reason) -> syncopate_shard_rejections_total; absent if the scrape failed.
  std::map<std::pair<std::string, std::string>, double> rejections;
};

struct SoakCriteria {
  absl::Duration warmup = absl::Minutes(2);
  // Averaging window for the RSS baseline (just after warm-up) and the final RSS (the run's end).
  absl::Duration rss_window = absl::Minutes(1);
  double max_rss_growth = 0.05;
  absl::Duration max_stall = absl::Seconds(20);  // two heartbeat timeouts
  // Rejection reasons a worker kill can cause, and for how long after the kill: a restarted
  // worker's first push can reach a shard before the membership that admits it ("not_member").
  std::set<std::string> kill_reasons = {"not_member"};
  absl::Duration kill_window = absl::Seconds(20);
};

struct RssGrowth {
  std::string process;
  double baseline_mib = 0;  // mean over [warmup, warmup + window)
  double final_mib = 0;     // mean over [end - window, end]
  double peak_mib = 0;      // after warm-up
  double growth = 0;        // final / baseline - 1
  int samples = 0;          // samples after warm-up
};

struct Stall {
  std::string shard;
  absl::Duration longest;                                  // without the version advancing
  absl::Duration ends_at;                                  // when that stall ended (or the run did)
  absl::Duration first_update = absl::InfiniteDuration();  // when the version first moved
  double final_version = 0;
};

struct RejectionTally {
  // (shard, reason) -> count.
  std::map<std::pair<std::string, std::string>, int64_t> explained;
  std::map<std::pair<std::string, std::string>, int64_t> unexplained;
  int64_t total_unexplained() const;
};

// One entry per process seen in any sample's rss, sorted by name. A process with no sample in
// a window gets growth 0 and samples 0 (the report flags it).
std::vector<RssGrowth> MeasureRssGrowth(const std::vector<SoakSample>& samples,
                                        const SoakCriteria& criteria);

// One entry per shard seen in any sample's versions, sorted by name.
std::vector<Stall> MeasureStalls(const std::vector<SoakSample>& samples);

RejectionTally AttributeRejections(const std::vector<SoakSample>& samples,
                                   const std::vector<absl::Duration>& kills,
                                   const SoakCriteria& criteria);

// Everything else the run observed, for the verdict and the table.
struct SoakRun {
  absl::Duration duration;
  int workers = 0;
  int shards = 0;
  std::vector<absl::Duration> kills;       // when each worker kill happened
  std::vector<std::string> kill_failures;  // kills or restarts that did not work
  std::vector<std::string> unexpected_exits;
  std::map<std::string, int> log_errors;  // process -> ERROR/FATAL lines in its log
  std::vector<std::string> first_errors;  // a few of those lines, verbatim
  int64_t examples = 0;
  double accuracy = 0;
  double worker_rss_mib = 0;  // mean over the workers at the end: how light they were
  bool job_running_at_end = false;
  bool interrupted = false;  // SIGTERM/SIGINT ended it before `duration`
};

struct SoakVerdict {
  std::vector<RssGrowth> rss;
  std::vector<Stall> stalls;
  RejectionTally rejections;
  std::vector<std::string> failures;  // one line per failed criterion; empty = passed
};

SoakVerdict Judge(const std::vector<SoakSample>& samples, const SoakRun& run,
                  const SoakCriteria& criteria);

// The summary as a Markdown table plus the failures, for stdout and summary.md.
std::string SoakSummary(const SoakVerdict& verdict, const SoakRun& run,
                        const SoakCriteria& criteria);

}  // namespace syncopate::bench

#endif  // SYNCOPATE_BENCH_SOAK_REPORT_H_
