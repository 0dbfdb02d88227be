// The one place that picks the aggregation kernels by ISA level (compiled once, portable).
#include "libs/aggregation/aggregation_kernels.h"
#include "libs/isa/dispatch.h"

SYNCOPATE_ISA_DECLARE_TABLES(syncopate::aggregation, syncopate::aggregation::AggregationKernels,
                             kAggregationKernels)

namespace syncopate::aggregation {

const AggregationKernels& AggregationKernelsFor(isa::IsaLevel level) {
  return SYNCOPATE_ISA_PICK(level, syncopate::aggregation, kAggregationKernels);
}

}  // namespace syncopate::aggregation
