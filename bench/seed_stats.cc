// syncopate-seed-stats: the statistics of seeded runs from a TSV, with libs/stats (the same
// intervals the straggler bench reports), for the shell-driven comparisons in bench/
// (torch_vs_peers.sh).
//
//   syncopate-seed-stats --tsv=FILE --group=COLUMN --seed=COLUMN --values=A,B [--ref=GROUP]
//
// For every group (a value of --group) and value column: the mean and its 95% Student-t interval
// over the seeds; against --ref, Welch's 95% interval of the difference of means and the mean
// and interval of the ratio paired by seed (rows of the same --seed), then, on a line of its own,
// the mean of the differences paired by seed with its 95% Student-t interval (n - 1 df over the
// seeds both groups ran). When both runs of a seed share its randomness (initialisation, data
// order), the paired interval removes the seed-to-seed variance the Welch one still carries.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "libs/stats/confidence.h"

ABSL_FLAG(std::string, tsv, "", "TSV file with a header line");
ABSL_FLAG(std::string, group, "config", "Column naming what is compared");
ABSL_FLAG(std::string, seed, "seed", "Column naming the seed (pairs rows for ratios)");
ABSL_FLAG(std::string, values, "", "Comma-separated numeric columns to summarise");
ABSL_FLAG(std::string, ref, "", "The group the others are compared with (optional)");

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "syncopate-seed-stats: %s\n", what.c_str());
  std::exit(2);
}

// absl::FormatSpec checks each literal format at compile time (a runtime format string is what
// GCC's -Wformat-truncation refused in the sanitizer build).
std::string Format(const syncopate::stats::Interval& i, const absl::FormatSpec<double>& format) {
  return absl::StrCat("[", absl::StrFormat(format, i.low), ", ", absl::StrFormat(format, i.high),
                      "]");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::ifstream in(absl::GetFlag(FLAGS_tsv));
  if (!in) Die("cannot read --tsv " + absl::GetFlag(FLAGS_tsv));
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = absl::StrSplit(line, '\t');
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    Die("no column '" + name + "' in the header");
  };
  const size_t group_column = column(absl::GetFlag(FLAGS_group));
  const size_t seed_column = column(absl::GetFlag(FLAGS_seed));
  const std::vector<std::string> names = absl::StrSplit(absl::GetFlag(FLAGS_values), ',');
  // value column -> group -> seed -> value
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> data;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = absl::StrSplit(line, '\t');
    if (cells.size() != header.size()) continue;
    for (const std::string& name : names) {
      double value = 0;
      if (!absl::SimpleAtod(cells[column(name)], &value)) continue;
      data[name][cells[group_column]][cells[seed_column]] = value;
    }
  }
  const std::string ref = absl::GetFlag(FLAGS_ref);
  for (const std::string& name : names) {
    std::printf("%s:\n", name.c_str());
    for (const auto& [group, by_seed] : data[name]) {
      std::vector<double> values;
      for (const auto& [seed, value] : by_seed) values.push_back(value);
      const auto mean = syncopate::stats::MeanInterval(values, 0.95);
      std::printf("  %-20s n=%zu mean %.4g %s\n", group.c_str(), values.size(),
                  syncopate::stats::Summarize(values).mean,
                  mean.ok() ? Format(*mean, "%.4g").c_str() : "");
    }
    if (ref.empty() || !data[name].contains(ref)) continue;
    const auto& reference = data[name][ref];
    for (const auto& [group, by_seed] : data[name]) {
      if (group == ref) continue;
      std::vector<double> a, b, ratios, differences;
      for (const auto& [seed, value] : reference) a.push_back(value);
      for (const auto& [seed, value] : by_seed) {
        b.push_back(value);
        if (auto it = reference.find(seed); it != reference.end()) {
          differences.push_back(it->second - value);
          if (value != 0) ratios.push_back(it->second / value);
        }
      }
      const auto difference = syncopate::stats::WelchDifferenceInterval(a, b, 0.95);
      const auto ratio = syncopate::stats::MeanInterval(ratios, 0.95);
      std::printf("  %s - %s: %+.4g %s (Welch 95%%); %s / %s paired by seed: %.3f %s\n",
                  ref.c_str(), group.c_str(), difference.ok() ? difference->estimate : 0.0,
                  difference.ok() ? Format(*difference, "%+.4g").c_str() : "", ref.c_str(),
                  group.c_str(), syncopate::stats::Summarize(ratios).mean,
                  ratio.ok() ? Format(*ratio, "%.3f").c_str() : "");
      // Its own line, after the Welch one: tests/conformance/run.py reads the first line that
      // names the two groups.
      const auto paired = syncopate::stats::MeanInterval(differences, 0.95);
      std::printf("  %s - %s paired by seed (n=%zu): %+.4g %s (95%%, t with n-1 df)\n", ref.c_str(),
                  group.c_str(), differences.size(), syncopate::stats::Summarize(differences).mean,
                  paired.ok() ? Format(*paired, "%+.4g").c_str() : "");
    }
  }
  return 0;
}
