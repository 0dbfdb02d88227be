// A CTR model (wide & deep, DeepFM or DCN) on Criteo-format data read from disk as it is needed
// (data::CriteoFiles, ADR 0011): the workload of model kinds WDL, DEEPFM and DCN. The deep table
// holds the fields' values, the wide table those and the crosses' value pairs.
// Thread-safety: thread-compatible, like every Workload.
#ifndef SYNCOPATE_LIBS_WORKLOAD_CTR_WORKLOAD_H_
#define SYNCOPATE_LIBS_WORKLOAD_CTR_WORKLOAD_H_

#include <cstdint>
#include <memory>

#include "libs/data/criteo_block_cache.h"
#include "libs/model/ctr_model.h"
#include "libs/workload/workload.h"

namespace syncopate::workload {

// Training batches are gathered from `examples` (blocks of the job's lease size); evaluation
// chunks are read from its files in order.
std::unique_ptr<Workload> NewCtrWorkload(model::CtrModel model, data::CriteoBlockCache examples);

}  // namespace syncopate::workload

#endif  // SYNCOPATE_LIBS_WORKLOAD_CTR_WORKLOAD_H_
