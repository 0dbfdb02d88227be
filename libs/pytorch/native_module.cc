// syncopate_native: the C++ readers python/syncopate/torch/data.py reads datasets with, built
// into every process that embeds Python (python_runtime.cc registers it before the interpreter
// starts), so a PyTorch job reads Fashion-MNIST and Criteo files with the same code, the same
// errors and the same keys as the built-in models.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "libs/data/criteo_block_cache.h"
#include "libs/data/idx_reader.h"
#include "libs/model/ctr_model.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"

namespace syncopate::pytorch {
namespace py = pybind11;
namespace {

// A status as the Python exception a user expects: OSError for files, IndexError for a row
// outside the data, ValueError for the rest (a bad line, a bad argument).
[[noreturn]] void Raise(const absl::Status& status) {
  PyObject* type = PyExc_ValueError;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnavailable:
      type = PyExc_OSError;
      break;
    case absl::StatusCode::kOutOfRange:
      type = PyExc_IndexError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, std::string(status.message()).c_str());
  throw py::error_already_set();
}

py::tuple LoadFashionMnist(const std::string& dir, const std::string& split, int64_t limit) {
  if (split != "train" && split != "test") Raise(absl::InvalidArgumentError("split: train|test"));
  absl::StatusOr<data::Dataset> loaded = data::LoadFashionMnist(
      dir, split == "train" ? data::Split::kTrain : data::Split::kTest, limit);
  if (!loaded.ok()) Raise(loaded.status());
  py::array_t<float> features({loaded->size, static_cast<int64_t>(loaded->dim)});
  std::memcpy(features.mutable_data(), loaded->features.data(),
              loaded->features.size() * sizeof(float));
  py::array_t<int64_t> labels(loaded->size);
  std::copy(loaded->labels.begin(), loaded->labels.end(), labels.mutable_data());
  return py::make_tuple(std::move(features), std::move(labels));
}

// syncopate.torch.Criteo's rows: data::CriteoBlockCache, the CTR workload's reader.
class CriteoReader {
 public:
  CriteoReader(const std::string& path, int64_t limit, int64_t block_size, int64_t cached_blocks) {
    absl::StatusOr<std::unique_ptr<data::CriteoFiles>> files =
        data::CriteoFiles::Open(path, {.limit = limit});
    if (!files.ok()) Raise(files.status());
    absl::StatusOr<data::CriteoBlockCache> cache =
        data::CriteoBlockCache::Create(*std::move(files), block_size, cached_blocks);
    if (!cache.ok()) Raise(cache.status());
    cache_ = std::make_unique<data::CriteoBlockCache>(*std::move(cache));
  }

  int64_t rows() const { return cache_->rows(); }

  // (numeric float32 n x 13 with NaN where missing, keys int64 n x 26, labels float32 n): each
  // categorical value as model::CategoricalKey(column, value), the built-in models' keys.
  py::tuple Read(const std::vector<int64_t>& examples) {
    if (absl::Status read = cache_->Gather(examples, batch_); !read.ok()) Raise(read);
    const auto n = static_cast<int64_t>(examples.size());
    py::array_t<float> numeric({n, int64_t{data::kCriteoNumeric}});
    std::memcpy(numeric.mutable_data(), batch_.numeric.data(),
                batch_.numeric.size() * sizeof(float));
    py::array_t<int64_t> keys({n, int64_t{data::kCriteoCategorical}});
    int64_t* out = keys.mutable_data();
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t* row = batch_.categorical_row(i);
      for (int f = 0; f < data::kCriteoCategorical; ++f) {
        // The key's bits as int64: torch has no uint64, and ShardedEmbedding only compares them.
        out[i * data::kCriteoCategorical + f] =
            static_cast<int64_t>(model::CategoricalKey(f, row[f]));
      }
    }
    py::array_t<float> labels(n);
    std::memcpy(labels.mutable_data(), batch_.labels.data(), batch_.labels.size() * sizeof(float));
    return py::make_tuple(std::move(numeric), std::move(keys), std::move(labels));
  }

 private:
  std::unique_ptr<data::CriteoBlockCache> cache_;
  data::CtrDataset batch_;
};

}  // namespace
}  // namespace syncopate::pytorch

PYBIND11_MODULE(syncopate_native, m) {
  namespace py = pybind11;
  using syncopate::pytorch::CriteoReader;
  m.doc() = "Syncopate's C++ dataset readers (libs/data), for syncopate.torch.data";
  m.def("load_fashion_mnist", &syncopate::pytorch::LoadFashionMnist, py::arg("dir"),
        py::arg("split"), py::arg("limit"));
  py::class_<CriteoReader>(m, "CriteoReader")
      .def(py::init<const std::string&, int64_t, int64_t, int64_t>(), py::arg("path"),
           py::arg("limit"), py::arg("block_size"), py::arg("cached_blocks"))
      .def("rows", &CriteoReader::rows)
      .def("read", &CriteoReader::Read, py::arg("examples"));
}
