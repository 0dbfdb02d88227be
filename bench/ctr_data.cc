#include "bench/ctr_data.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "libs/datagen/ctr_generator.h"

namespace syncopate::bench {
namespace {

constexpr char kSidecar[] = "/ctr_data.txt";

// The sidecar's one line: "train_rows test_rows bayes_auc bayes_logloss".
bool ReadSidecar(const std::string& dir, int64_t train_rows, int64_t test_rows, CtrData& data) {
  std::ifstream in(dir + kSidecar);
  int64_t train = 0;
  int64_t test = 0;
  if (!(in >> train >> test >> data.bayes_auc >> data.bayes_logloss)) return false;
  return train == train_rows && test == test_rows && std::filesystem::exists(data.train_path) &&
         std::filesystem::exists(data.test_path);
}

}  // namespace

absl::StatusOr<CtrData> PrepareCtrData(const std::string& dir, int64_t train_rows,
                                       int64_t test_rows) {
  CtrData data;
  data.train_path = dir + "/ctr_train.tsv.gz";
  data.test_path = dir + "/ctr_test.tsv.gz";
  if (ReadSidecar(dir, train_rows, test_rows, data)) {
    data.cached = true;
    std::printf(
        "ctr data: %ld train / %ld test rows in %s (generated earlier), test Bayes AUC %.4f\n",
        static_cast<long>(train_rows), static_cast<long>(test_rows), dir.c_str(), data.bayes_auc);
    return data;
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  std::filesystem::remove(dir + kSidecar, error);  // stale: these files are about to change
  const datagen::CtrTeacherConfig teacher;         // the defaults: one teacher for both files
  absl::StatusOr<datagen::CtrGenerationReport> train =
      datagen::GenerateCtr(teacher, /*sample_seed=*/1, train_rows, data.train_path);
  if (!train.ok()) return train.status();
  absl::StatusOr<datagen::CtrGenerationReport> test =
      datagen::GenerateCtr(teacher, /*sample_seed=*/2, test_rows, data.test_path);
  if (!test.ok()) return test.status();
  data.bayes_auc = test->bayes_auc;
  data.bayes_logloss = test->bayes_logloss;
  std::ofstream out(dir + kSidecar);
  out.precision(17);
  out << train_rows << " " << test_rows << " " << data.bayes_auc << " " << data.bayes_logloss
      << "\n";
  if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", dir, kSidecar));
  std::printf("ctr data: %ld train / %ld test rows, positive rate %.3f, test Bayes AUC %.4f\n",
              static_cast<long>(train->rows), static_cast<long>(test->rows), test->positive_rate,
              test->bayes_auc);
  return data;
}

}  // namespace syncopate::bench
