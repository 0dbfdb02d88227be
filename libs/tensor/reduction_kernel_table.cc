// The one place that picks the reduction kernels by ISA level (compiled once, portable).
#include "libs/isa/dispatch.h"
#include "libs/tensor/reduction_kernels.h"

SYNCOPATE_ISA_DECLARE_TABLES(syncopate::tensor, syncopate::tensor::ReductionKernels,
                             kReductionKernels)

namespace syncopate::tensor {

const ReductionKernels& ReductionKernelsFor(isa::IsaLevel level) {
  return SYNCOPATE_ISA_PICK(level, syncopate::tensor, kReductionKernels);
}

}  // namespace syncopate::tensor
