// `syncopate datagen ctr`: a synthetic Criteo-format click file (libs/datagen/ctr_generator.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/datagen/ctr_generator.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"

namespace syncopate::cli {

// `syncopate datagen ctr`: Criteo-format rows from a planted teacher of
// libs/datagen/ctr_generator.h (--teacher=pairs, the default, segments, longtail or heavytail),
// with the Bayes AUC and logloss of the file written.
int RunDatagen(const std::vector<char*>& args) {
  const std::string kind = args.size() > 2 ? args[2] : "";
  if (kind != "ctr") {
    runtime::Die(kind.empty() ? "datagen: missing kind (expected: datagen ctr)"
                              : "datagen: unknown kind '" + kind + "' (expected ctr)");
  }
  if (args.size() > 3) {
    runtime::Die(absl::StrCat("datagen ctr: unexpected argument '", args[3], "'"));
  }
  const int64_t rows = absl::GetFlag(FLAGS_rows);
  if (rows < 1) runtime::Die(absl::StrCat("datagen ctr: --rows must be >= 1, got ", rows));
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) runtime::Die("datagen ctr: --out is required (gzip when it ends in .gz)");
  const uint64_t teacher_seed = absl::GetFlag(FLAGS_teacher_seed);
  datagen::CtrTeacherConfig teacher = {.teacher_seed = teacher_seed};
  const std::string teacher_name = absl::GetFlag(FLAGS_teacher);
  if (teacher_name == "segments") {
    teacher.kind = datagen::CtrTeacherKind::kSegments;
  } else if (teacher_name == "longtail") {
    teacher = datagen::LongTailTeacherConfig(teacher_seed);
  } else if (teacher_name == "heavytail") {
    teacher = datagen::HeavyTailTeacherConfig(teacher_seed);
  } else if (teacher_name != "pairs") {
    runtime::Die(
        absl::StrCat("datagen ctr: --teacher must be pairs, segments, longtail or heavytail, got '",
                     teacher_name, "'"));
  }
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const datagen::CtrKeyChurn churn = {.period_rows = absl::GetFlag(FLAGS_churn_period_rows),
                                      .fraction = absl::GetFlag(FLAGS_churn_fraction)};
  const absl::Time start = absl::Now();
  absl::StatusOr<datagen::CtrGenerationReport> report =
      datagen::GenerateCtr(teacher, seed, rows, out, churn);
  if (!report.ok()) runtime::Die(absl::StrCat("datagen ctr: ", report.status().message()), 1);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  printf(
      "syncopate datagen ctr: wrote %ld rows to %s in %.1f s (teacher %s, teacher_seed %lu, "
      "seed %lu): "
      "%.1f%% clicks, Bayes AUC %.4f, Bayes logloss %.4f\n",
      static_cast<long>(report->rows), out.c_str(), seconds, teacher_name.c_str(),
      static_cast<unsigned long>(teacher.teacher_seed), static_cast<unsigned long>(seed),
      100 * report->positive_rate, report->bayes_auc, report->bayes_logloss);
  printf(
      "rows=%ld positive_rate=%.4f bayes_auc=%.4f bayes_logloss=%.4f teacher_seed=%lu seed=%lu "
      "seconds=%.2f out=%s teacher=%s\n",
      static_cast<long>(report->rows), report->positive_rate, report->bayes_auc,
      report->bayes_logloss, static_cast<unsigned long>(teacher.teacher_seed),
      static_cast<unsigned long>(seed), seconds, out.c_str(), teacher_name.c_str());
  return 0;
}

}  // namespace syncopate::cli
