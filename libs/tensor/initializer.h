// Deterministic, partition-independent initialisation of dense tensor slices and embedding rows.
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_TENSOR_INITIALIZER_H_
#define SYNCOPATE_LIBS_TENSOR_INITIALIZER_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::tensor {

// Fills `out` with elements [tensor_offset, tensor_offset + out.size()) of the tensor
// `tensor_name` initialised by `init`. Each value is a pure function of (seed, tensor_name,
// element index) — a counter-based generator, not a stream — so a tensor split across any number
// of shards, in any order, initialises exactly as if it were filled in one call, on any build.
//
// INVALID_ARGUMENT, leaving `out` untouched, for an unspecified or unknown kind, a negative
// offset, a non-positive fan the kind's formula uses (fan_in for HE_UNIFORM; fan_in and fan_out
// for GLOROT_UNIFORM; ZEROS and UNIFORM use neither), or UNIFORM's scale not finite and > 0.
absl::Status InitializeSlice(const syncopate::v1::Initializer& init, uint64_t seed,
                             std::string_view tensor_name, int64_t tensor_offset,
                             std::span<float> out);

// Fills `out` (one embedding row) with the initial value of row `key` of the table `table_name`.
// Each element is a pure function of (seed, table_name, key, element index): the row reads the
// same on any shard, in any process, whichever shard creates it. Any kind InitializeSlice takes
// (ZEROS, UNIFORM(scale), HE_UNIFORM, GLOROT_UNIFORM), with the same INVALID_ARGUMENT cases.
absl::Status InitializeRow(const syncopate::v1::Initializer& init, uint64_t seed,
                           std::string_view table_name, uint64_t key, std::span<float> out);

}  // namespace syncopate::tensor

#endif  // SYNCOPATE_LIBS_TENSOR_INITIALIZER_H_
