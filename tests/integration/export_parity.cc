// The C++ side of tests/integration/export_test.sh: what the cluster's own code computes, written
// as .npy files for the Python side to compare against.
//   export_parity keys CRITEO_FILE OUT.npy
//       every categorical key of the file (model::CategoricalKey over the C++ reader's values),
//       uint64 [rows, 26]
//   export_parity predict EXPORT_DIR CRITEO_FILE OUT.npy
//       the click probability of every row by the exported CTR model, as the evaluator computes
//       it (model::CtrModel::Predict in chunks of its size, rows looked up in the export with the
//       cluster's rule for keys without a row), float32 [rows]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/data/criteo_files.h"
#include "libs/job/model_kind.h"
#include "libs/model/ctr_model.h"
#include "libs/model_export/array_files.h"
#include "libs/model_export/export_reader.h"

namespace syncopate {
namespace {

constexpr int64_t kChunk = 8192;  // the CTR evaluator's (libs/workload/ctr_workload.cc)

int Fail(const absl::Status& status) {
  fprintf(stderr, "export_parity: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Keys(const std::string& file, const std::string& out) {
  auto files = data::CriteoFiles::Open(file, {});
  if (!files.ok()) return Fail(files.status());
  const int64_t rows = (*files)->rows();
  auto writer = model_export::NpyWriter::Create(out, model_export::ArrayType::kUint64,
                                                {rows, model::kCtrCategorical});
  if (!writer.ok()) return Fail(writer.status());
  for (int64_t begin = 0; begin < rows; begin += kChunk) {
    auto batch = (*files)->Read(begin, std::min(rows, begin + kChunk));
    if (!batch.ok()) return Fail(batch.status());
    std::vector<uint64_t> keys;
    for (int64_t i = 0; i < batch->size; ++i) {
      for (int f = 0; f < model::kCtrCategorical; ++f) {
        keys.push_back(model::CategoricalKey(f, batch->categorical_row(i)[f]));
      }
    }
    writer->Append(std::span<const uint64_t>(keys));
  }
  absl::Status closed = writer->Close();
  return closed.ok() ? 0 : Fail(closed);
}

int Predict(const std::string& dir, const std::string& file, const std::string& out) {
  auto exported = model_export::ExportedModel::Open(dir);
  if (!exported.ok()) return Fail(exported.status());
  auto model = job::CtrModelForJob(exported->job());
  if (!model.ok()) return Fail(model.status());
  auto files = data::CriteoFiles::Open(file, {});
  if (!files.ok()) return Fail(files.status());
  const int64_t rows = (*files)->rows();
  auto writer = model_export::NpyWriter::Create(out, model_export::ArrayType::kFloat32, {rows});
  if (!writer.ok()) return Fail(writer.status());
  model::BatchKeys keys;
  const int dim = model->embedding_dim();
  for (int64_t begin = 0; begin < rows; begin += kChunk) {
    auto batch = (*files)->Read(begin, std::min(rows, begin + kChunk));
    if (!batch.ok()) return Fail(batch.status());
    const model::CtrBatchView view{batch->numeric.data(), batch->categorical.data(),
                                   batch->labels.data(), batch->size};
    model->CollectKeys(view, keys);
    std::vector<float> deep(keys.keys.size() * static_cast<size_t>(dim));
    std::vector<float> wide(keys.wide_keys.size());
    absl::Status looked = exported->LookUp(model::CtrModel::kDeepTable, keys.keys, deep);
    if (looked.ok()) looked = exported->LookUp(model::CtrModel::kWideTable, keys.wide_keys, wide);
    if (!looked.ok()) return Fail(looked);
    std::vector<float> scores(static_cast<size_t>(batch->size));
    absl::Status predicted = model->Predict(exported->dense(), view, keys, deep, wide, scores);
    if (!predicted.ok()) return Fail(predicted);
    writer->Append(std::span<const float>(scores));
  }
  absl::Status closed = writer->Close();
  return closed.ok() ? 0 : Fail(closed);
}

}  // namespace
}  // namespace syncopate

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "keys" && argc == 4) return syncopate::Keys(argv[2], argv[3]);
  if (command == "predict" && argc == 5) return syncopate::Predict(argv[2], argv[3], argv[4]);
  fprintf(
      stderr,
      "usage: export_parity keys CRITEO_FILE OUT.npy | predict EXPORT_DIR CRITEO_FILE OUT.npy\n");
  return 2;
}
