// The CTR data the benchmarks train on (`./dev bench`'s ctr scenario and `./dev bench --sim`'s):
// Criteo-format files from the planted-teacher generator (libs/datagen/ctr_generator.h, what
// `syncopate datagen ctr --seed 1` / `--seed 2` write), one teacher (the defaults) for both files.
//
// Generated once per directory and reused: the generator is deterministic (same teacher, same
// sample seeds, same rows, same bytes), so a pair written earlier with the same row counts is
// read back instead of regenerated (400,000 rows take tens of seconds). The generation's Bayes
// figures are kept beside the files in ctr_data.txt, written last, so an interrupted generation
// is never mistaken for a complete one.
//
// Thread-safety: PrepareCtrData writes files; one caller per directory at a time.
#ifndef SYNCOPATE_BENCH_CTR_DATA_H_
#define SYNCOPATE_BENCH_CTR_DATA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace syncopate::bench {

// The row counts both benchmarks generate by default (--ctr_train_rows, --ctr_test_rows): one
// data set, so the simulated and the real ctr runs train on the same files.
inline constexpr int64_t kBenchCtrTrainRows = 400000;
inline constexpr int64_t kBenchCtrTestRows = 50000;

struct CtrData {
  std::string train_path;
  std::string test_path;
  double bayes_auc = 0;  // the teacher's AUC on the test file: the best any model can reach
  double bayes_logloss = 0;
  bool cached = false;  // read back from an earlier generation
};

// The files dir/ctr_train.tsv.gz (sample seed 1) and dir/ctr_test.tsv.gz (seed 2), generated
// unless dir already holds them for these row counts. Prints one line saying which.
absl::StatusOr<CtrData> PrepareCtrData(const std::string& dir, int64_t train_rows,
                                       int64_t test_rows);

}  // namespace syncopate::bench

#endif  // SYNCOPATE_BENCH_CTR_DATA_H_
