// What a worker trains and an evaluator measures, independent of the model: the seam between the
// cluster's worker runtime and a model (the MLP on Fashion-MNIST, the CTR models on Criteo-format
// data, a user's PyTorch module). The worker loop (pull, compute, push) and the evaluator loop
// are the same for every model; only this interface differs.
//
// A batch is prepared first (PrepareTrain / PrepareEval): afterwards keys() lists, per embedding
// table, the distinct rows it touches, which the caller pulls from the shards; the step then
// takes those rows (aligned with keys()) and returns row gradients aligned the same way.
// Thread-safety: thread-compatible; one training loop owns an instance.
#ifndef SYNCOPATE_LIBS_WORKLOAD_WORKLOAD_H_
#define SYNCOPATE_LIBS_WORKLOAD_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model/mlp.h"  // model::Evaluation
#include "syncopate/v1/job.pb.h"

namespace syncopate::workload {

// Per table, the rows of keys()[table] in order (keys x width floats).
using TableRows = std::vector<std::vector<float>>;
using TableKeys = std::vector<std::vector<uint64_t>>;

class Workload {
 public:
  virtual ~Workload() = default;

  // Row width of each embedding table (table id order); empty for dense-only models.
  virtual const std::vector<int32_t>& table_dims() const = 0;
  virtual int64_t num_parameters() const = 0;
  // The distinct rows the prepared batch touches, per table.
  virtual const TableKeys& keys() const = 0;

  // Training (workers): the training set's size, then batches of its example indices. A
  // dataset on disk reads the lease blocks the examples fall in (data::CriteoFiles); errors are
  // that read's (DATA_LOSS: a bad line, a file changed since it was counted).
  virtual int64_t train_size() const = 0;
  virtual absl::Status PrepareTrain(std::span<const int64_t> examples) = 0;
  // Mean loss of the prepared batch; writes the dense gradient and the row gradients (resized to
  // the rows' shapes).
  virtual absl::StatusOr<float> TrainStep(std::span<const float> params, const TableRows& rows,
                                          std::span<float> dense_grad, TableRows& row_grads) = 0;

  // Evaluation (the evaluator): the evaluation set in chunks [begin, end) of at most
  // eval_chunk() examples, scored in order, then the metrics over everything scored.
  virtual int64_t eval_size() const = 0;
  virtual int64_t eval_chunk() const = 0;
  virtual absl::Status PrepareEval(int64_t begin, int64_t end) = 0;
  virtual absl::Status ScoreEval(std::span<const float> params, const TableRows& rows) = 0;
  // Accuracy, mean loss, AUC over the chunks scored since the last FinishEval; resets.
  virtual absl::StatusOr<model::Evaluation> FinishEval() = 0;
};

// kEvaluate scores the test set, kValidate the validation set (DatasetSpec.validation_path)
// through the same evaluation interface.
enum class Purpose { kTrain, kEvaluate, kValidate };

struct WorkloadOptions {
  // CTR training data stays on disk; this many lease blocks (job.block_size examples, ~264 bytes
  // each in memory) are kept parsed, least recently used dropped first. A worker's batches come
  // from the lease it is finishing and the next one; the simulator, whose workers share one
  // workload, keeps two per worker.
  int64_t cached_blocks = 4;
};

// A job's workload is built by its model kind (job::CreateWorkload, libs/job/model_kind.h).

}  // namespace syncopate::workload

#endif  // SYNCOPATE_LIBS_WORKLOAD_WORKLOAD_H_
