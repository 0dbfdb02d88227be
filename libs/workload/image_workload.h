// The dense MLP on an image dataset held in memory (Fashion-MNIST): the workload of model kind
// MLP. No embedding tables, so keys() stays empty.
// Thread-safety: thread-compatible, like every Workload.
#ifndef SYNCOPATE_LIBS_WORKLOAD_IMAGE_WORKLOAD_H_
#define SYNCOPATE_LIBS_WORKLOAD_IMAGE_WORKLOAD_H_

#include <memory>

#include "libs/data/idx_reader.h"
#include "libs/model/mlp.h"
#include "libs/workload/workload.h"

namespace syncopate::workload {

std::unique_ptr<Workload> NewImageWorkload(model::Mlp mlp, data::Dataset data);

}  // namespace syncopate::workload

#endif  // SYNCOPATE_LIBS_WORKLOAD_IMAGE_WORKLOAD_H_
