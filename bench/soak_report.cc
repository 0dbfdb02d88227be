#include "bench/soak_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace syncopate::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

}  // namespace

int64_t RejectionTally::total_unexplained() const {
  int64_t total = 0;
  for (const auto& [key, count] : unexplained) total += count;
  return total;
}

std::vector<RssGrowth> MeasureRssGrowth(const std::vector<SoakSample>& samples,
                                        const SoakCriteria& criteria) {
  std::set<std::string> processes;
  for (const SoakSample& s : samples) {
    for (const auto& [name, bytes] : s.rss) processes.insert(name);
  }
  const absl::Duration end = samples.empty() ? absl::ZeroDuration() : samples.back().at;
  const absl::Duration baseline_end = criteria.warmup + criteria.rss_window;
  const absl::Duration final_start = end - criteria.rss_window;
  std::vector<RssGrowth> growths;
  for (const std::string& name : processes) {
    RssGrowth g;
    g.process = name;
    double baseline_sum = 0, final_sum = 0;
    int baseline_n = 0, final_n = 0;
    for (const SoakSample& s : samples) {
      auto it = s.rss.find(name);
      if (it == s.rss.end() || s.at < criteria.warmup) continue;
      const double mib = static_cast<double>(it->second) / kMiB;
      ++g.samples;
      g.peak_mib = std::max(g.peak_mib, mib);
      if (s.at < baseline_end) {
        baseline_sum += mib;
        ++baseline_n;
      }
      if (s.at >= final_start) {
        final_sum += mib;
        ++final_n;
      }
    }
    if (baseline_n > 0 && final_n > 0) {
      g.baseline_mib = baseline_sum / baseline_n;
      g.final_mib = final_sum / final_n;
      g.growth = g.final_mib / g.baseline_mib - 1;
    } else {
      g.samples = 0;  // one of the windows is empty: no growth can be stated
    }
    growths.push_back(g);
  }
  return growths;
}

std::vector<Stall> MeasureStalls(const std::vector<SoakSample>& samples) {
  std::set<std::string> shards;
  for (const SoakSample& s : samples) {
    for (const auto& [name, version] : s.versions) shards.insert(name);
  }
  std::vector<Stall> stalls;
  for (const std::string& name : shards) {
    Stall stall;
    stall.shard = name;
    bool seen = false;
    double last = 0;
    absl::Duration first_seen, last_advance;
    for (const SoakSample& s : samples) {
      auto it = s.versions.find(name);
      if (it == s.versions.end()) continue;  // a failed scrape: the gap goes on
      if (!seen) {
        seen = true;
        last = it->second;
        first_seen = s.at;
        continue;
      }
      if (stall.first_update == absl::InfiniteDuration()) {
        // Waiting for the workers before the job starts is not a stall.
        if (it->second > last) {
          stall.first_update = s.at;
          last = it->second;
          last_advance = s.at;
        }
        continue;
      }
      // Measured at every sample, the advancing ones included: the time between two observed
      // advances bounds the stall from above (to within one sampling period).
      const absl::Duration gap = s.at - last_advance;
      if (gap > stall.longest) {
        stall.longest = gap;
        stall.ends_at = s.at;
      }
      if (it->second > last) {
        last = it->second;
        last_advance = s.at;
      }
    }
    if (seen && stall.first_update == absl::InfiniteDuration()) {
      stall.longest = samples.back().at - first_seen;  // never moved at all
      stall.ends_at = samples.back().at;
    }
    stall.final_version = last;
    stalls.push_back(stall);
  }
  return stalls;
}

RejectionTally AttributeRejections(const std::vector<SoakSample>& samples,
                                   const std::vector<absl::Duration>& kills,
                                   const SoakCriteria& criteria) {
  RejectionTally tally;
  std::map<std::pair<std::string, std::string>, std::pair<absl::Duration, double>> previous;
  for (const SoakSample& s : samples) {
    for (const auto& [key, value] : s.rejections) {
      absl::Duration from = absl::ZeroDuration();
      double delta = value;
      auto it = previous.find(key);
      if (it != previous.end()) {
        from = it->second.first;
        // A counter that went down belongs to a restarted shard: it counts from 0 again.
        if (value >= it->second.second) delta = value - it->second.second;
      }
      previous[key] = {s.at, value};
      if (delta <= 0) continue;
      // The increase happened somewhere in (from, s.at]: explained if that interval meets
      // [kill, kill + window] for some kill and a kill can cause this reason.
      bool explained = false;
      if (criteria.kill_reasons.contains(key.second)) {
        for (absl::Duration kill : kills) {
          if (kill <= s.at && from <= kill + criteria.kill_window) explained = true;
        }
      }
      (explained ? tally.explained : tally.unexplained)[key] += static_cast<int64_t>(delta);
    }
  }
  return tally;
}

SoakVerdict Judge(const std::vector<SoakSample>& samples, const SoakRun& run,
                  const SoakCriteria& criteria) {
  SoakVerdict v;
  v.rss = MeasureRssGrowth(samples, criteria);
  v.stalls = MeasureStalls(samples);
  v.rejections = AttributeRejections(samples, run.kills, criteria);
  for (const RssGrowth& g : v.rss) {
    if (g.samples == 0) {
      v.failures.push_back(absl::StrCat(g.process,
                                        ": no RSS samples in the baseline or final "
                                        "window (run shorter than warm-up + 2 windows?)"));
    } else if (g.growth >= criteria.max_rss_growth) {
      v.failures.push_back(absl::StrFormat("%s: RSS grew %.1f%% (%.1f -> %.1f MiB) after warm-up",
                                           g.process, 100 * g.growth, g.baseline_mib, g.final_mib));
    }
  }
  if (v.stalls.empty()) v.failures.emplace_back("no shard version was ever read");
  for (const Stall& s : v.stalls) {
    if (s.first_update == absl::InfiniteDuration()) {
      v.failures.push_back(absl::StrCat(s.shard, ": its version never advanced"));
    } else if (s.longest >= criteria.max_stall) {
      v.failures.push_back(absl::StrCat(s.shard, ": no update for ", Seconds(s.longest), " (until ",
                                        Seconds(s.ends_at), ")"));
    }
  }
  for (const auto& [key, count] : v.rejections.unexplained) {
    v.failures.push_back(
        absl::StrCat(key.first, ": ", count, " unexplained '", key.second, "' rejections"));
  }
  for (const auto& [process, count] : run.log_errors) {
    if (count > 0) {
      v.failures.push_back(absl::StrCat(process, ": ", count, " ERROR lines in its log"));
    }
  }
  for (const std::string& exit : run.unexpected_exits) {
    v.failures.push_back("unexpected exit: " + exit);
  }
  for (const std::string& kill : run.kill_failures) {
    v.failures.push_back("fault injection: " + kill);
  }
  if (!run.job_running_at_end) v.failures.emplace_back("the job was not running at the end");
  return v;
}

std::string SoakSummary(const SoakVerdict& verdict, const SoakRun& run,
                        const SoakCriteria& criteria) {
  std::string out = absl::StrFormat(
      "soak: %s, %d workers x %d shards, gba, %d worker kills; %d examples trained, last "
      "evaluation %.2f%%; worker RSS %.1f MiB each (mean at the end)\n\n",
      absl::FormatDuration(absl::Trunc(run.duration, absl::Seconds(1))), run.workers, run.shards,
      static_cast<int>(run.kills.size()), run.examples, 100 * run.accuracy, run.worker_rss_mib);
  absl::StrAppend(&out, "| criterion | measured | goal | verdict |\n|---|---|---|---|\n");
  auto row = [&out](const std::string& what, const std::string& measured, const std::string& goal,
                    bool ok) {
    absl::StrAppend(&out, "| ", what, " | ", measured, " | ", goal, " | ", ok ? "ok" : "FAIL",
                    " |\n");
  };
  const std::string growth_goal =
      absl::StrFormat("< %.0f%% after %s warm-up", 100 * criteria.max_rss_growth,
                      absl::FormatDuration(criteria.warmup));
  for (const RssGrowth& g : verdict.rss) {
    row(g.process + " RSS growth",
        g.samples == 0 ? "no samples"
                       : absl::StrFormat("%+.2f%% (%.1f -> %.1f MiB, peak %.1f)", 100 * g.growth,
                                         g.baseline_mib, g.final_mib, g.peak_mib),
        growth_goal, g.samples > 0 && g.growth < criteria.max_rss_growth);
  }
  for (const Stall& s : verdict.stalls) {
    row(s.shard + " longest stall",
        s.first_update == absl::InfiniteDuration()
            ? "never updated"
            : absl::StrFormat("%s (version %.0f at the end)", Seconds(s.longest), s.final_version),
        "< " + Seconds(criteria.max_stall) + " (2 heartbeat timeouts)",
        s.first_update != absl::InfiniteDuration() && s.longest < criteria.max_stall);
  }
  auto reasons = [](const std::map<std::pair<std::string, std::string>, int64_t>& counts) {
    std::map<std::string, int64_t> by_reason;
    for (const auto& [key, count] : counts) by_reason[key.second] += count;
    if (by_reason.empty()) return std::string("0");
    return absl::StrJoin(by_reason, ", ", [](std::string* s, const auto& entry) {
      absl::StrAppend(s, entry.second, " ", entry.first);
    });
  };
  row("rejections after a kill", reasons(verdict.rejections.explained),
      absl::StrCat(absl::StrJoin(criteria.kill_reasons, ", "), " within ",
                   Seconds(criteria.kill_window), " of a kill"),
      true);
  row("other rejections", reasons(verdict.rejections.unexplained), "0",
      verdict.rejections.total_unexplained() == 0);
  int errors = 0;
  for (const auto& [process, count] : run.log_errors) errors += count;
  row("ERROR/FATAL log lines", absl::StrCat(errors, " in ", run.log_errors.size(), " logs"), "0",
      errors == 0);
  row("unexpected exits", absl::StrCat(run.unexpected_exits.size()), "0",
      run.unexpected_exits.empty());
  row("kills and restarts",
      absl::StrCat(run.kills.size(), " done, ", run.kill_failures.size(), " failed"), "all",
      run.kill_failures.empty());
  row("job still running at the end", run.job_running_at_end ? "yes" : "no", "yes",
      run.job_running_at_end);
  if (!run.first_errors.empty()) {
    absl::StrAppend(&out, "\nfirst error lines:\n");
    for (const std::string& line : run.first_errors) absl::StrAppend(&out, "    ", line, "\n");
  }
  if (run.interrupted) {
    absl::StrAppend(&out, "\nsoak: INTERRUPTED (the table covers what was seen until then)\n");
  } else {
    absl::StrAppend(&out, verdict.failures.empty() ? "\nsoak: PASSED\n" : "\nsoak: FAILED\n");
  }
  for (const std::string& failure : verdict.failures) absl::StrAppend(&out, "  - ", failure, "\n");
  return out;
}

}  // namespace syncopate::bench
