// A user's PyTorch model (ModelSpec.kind TORCH, a Python file naming its module, datasets and
// loss; python/syncopate/torch) seen from the C++ side: what the coordinator reads off it once,
// and the Workload a worker or evaluator trains it through. The C++ worker runtime keeps every
// protocol rule (leases, pulls, pushes, tokens, modes, retries); the module is only asked for
// keys, a forward and backward pass, and scores (ADR 0013).
//
// Thread-safety: DescribeTorchModel is thread-safe; a workload is thread-compatible, like every
// Workload (each call takes the GIL).
#ifndef SYNCOPATE_LIBS_PYTORCH_TORCH_MODEL_H_
#define SYNCOPATE_LIBS_PYTORCH_TORCH_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/workload/workload.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::pytorch {

struct TorchTensor {
  std::string name;  // named_parameters()'s or named_buffers()'s
  std::vector<int64_t> shape;
  int64_t size = 0;  // elements
  // A buffer (BatchNorm's running statistics, a registered mask...), not a parameter: the shards
  // hold it as float32 and apply the mean of the workers' changes to it (ADR 0018). `dtype` is
  // the module's own ("float32", "int64", "bool", ...).
  bool buffer = false;
  std::string dtype = {};
};

struct TorchTable {
  std::string name;
  int32_t dim = 0;
  double init_scale = 0;  // rows start U(-scale, +scale)
};

struct TorchModelDescription {
  // named_parameters(), then named_buffers(), in their order: the flat vector's.
  std::vector<TorchTensor> dense;
  std::vector<TorchTable> tables;     // first-seen order among the module's ShardedEmbeddings
  std::vector<float> initial_values;  // the module as model() built it with the job's seed
  int64_t train_examples = 0;         // len(train_dataset(data))
  std::string task;                   // "classification" (N x C logits) or "binary" (N logits)
};

// Builds the job's module with its seed (torch.manual_seed), its training set, and runs one
// step on two examples, so a module, dataset or loss that cannot train fails here, at the
// coordinator's start, with the traceback's last line (INVALID_ARGUMENT). FAILED_PRECONDITION
// when the interpreter or Syncopate's Python package cannot start.
absl::StatusOr<TorchModelDescription> DescribeTorchModel(const v1::JobSpec& job);

// The job's module as a workload. The job spec is the one the coordinator handed out, with its
// layout recorded (ModelSpec.layout): a module whose parameters or tables differ from it is
// refused (FAILED_PRECONDITION naming the first difference), so a worker running another
// version of the model file never pushes into the job.
absl::StatusOr<std::unique_ptr<workload::Workload>> NewTorchWorkload(const v1::JobSpec& job,
                                                                     workload::Purpose purpose);

}  // namespace syncopate::pytorch

#endif  // SYNCOPATE_LIBS_PYTORCH_TORCH_MODEL_H_
