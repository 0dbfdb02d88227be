// The one place that picks the optimizers' kernels by ISA level (compiled once, portable).
#include "libs/isa/dispatch.h"
#include "libs/optim/update_kernels.h"

SYNCOPATE_ISA_DECLARE_TABLES(syncopate::optim, syncopate::optim::UpdateKernels, kUpdateKernels)

namespace syncopate::optim {

const UpdateKernels& UpdateKernelsFor(isa::IsaLevel level) {
  return SYNCOPATE_ISA_PICK(level, syncopate::optim, kUpdateKernels);
}

}  // namespace syncopate::optim
