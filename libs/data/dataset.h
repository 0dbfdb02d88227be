// An in-memory labelled dataset: the common shape every loader (IDX, Criteo TSV, ...) returns
// and every model consumes.
// Thread-safety: a plain value type. Concurrent const access is safe; mutation needs external
// synchronization.
#ifndef SYNCOPATE_LIBS_DATA_DATASET_H_
#define SYNCOPATE_LIBS_DATA_DATASET_H_

#include <cstdint>
#include <vector>

namespace syncopate::data {

// One example per row.
struct Dataset {
  int64_t size = 0;
  int dim = 0;
  int num_classes = 0;
  std::vector<float> features;  // size * dim, row-major, pixels scaled to [0, 1]
  std::vector<int32_t> labels;  // size

  // The `dim` features of example `i`; `i` must be in [0, size).
  const float* example(int64_t i) const { return features.data() + i * dim; }
};

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_DATASET_H_
