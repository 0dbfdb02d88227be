// The one place that picks the MLP's kernels by ISA level (compiled once, portable).
#include "libs/isa/dispatch.h"
#include "libs/model/mlp_kernels.h"

SYNCOPATE_ISA_DECLARE_TABLES(syncopate::model, syncopate::model::MlpKernels, kMlpKernels)

namespace syncopate::model {

const MlpKernels& MlpKernelsFor(isa::IsaLevel level) {
  return SYNCOPATE_ISA_PICK(level, syncopate::model, kMlpKernels);
}

}  // namespace syncopate::model
