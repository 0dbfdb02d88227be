#include "libs/worker/key_routing.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/embedding/owner_shard.h"
#include "libs/tensor/packed.h"

namespace syncopate::worker {

KeyRouting::KeyRouting(int32_t num_shards, std::vector<int32_t> table_dims)
    : num_shards_(num_shards),
      table_dims_(std::move(table_dims)),
      positions_(static_cast<size_t>(std::max(num_shards, 0))) {}

absl::Status KeyRouting::Route(const workload::TableKeys* keys) {
  const size_t tables = keys == nullptr ? 0 : keys->size();
  keys_.clear();
  for (auto& by_table : positions_) by_table.clear();
  if (tables != 0 && tables != table_dims_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys of ", tables, " tables; the model has ", table_dims_.size()));
  }
  if (tables == 0) return absl::OkStatus();
  keys_ = *keys;
  for (auto& by_table : positions_) by_table.assign(tables, {});
  for (size_t t = 0; t < tables; ++t) {
    const std::vector<uint64_t>& table_keys = keys_[t];
    for (size_t k = 0; k < table_keys.size(); ++k) {
      positions_[static_cast<size_t>(embedding::OwnerShard(table_keys[k], num_shards_))][t]
          .push_back(static_cast<uint32_t>(k));
    }
  }
  return absl::OkStatus();
}

std::vector<v1::SparseRows> KeyRouting::Requests(int32_t shard) const {
  std::vector<v1::SparseRows> wanted;
  std::vector<uint64_t> shard_keys;
  for (size_t t = 0; t < keys_.size(); ++t) {
    const std::vector<uint32_t>& positions = positions_[static_cast<size_t>(shard)][t];
    if (positions.empty()) continue;
    shard_keys.clear();
    for (uint32_t k : positions) shard_keys.push_back(keys_[t][k]);
    v1::SparseRows& request = wanted.emplace_back();
    request.set_table(static_cast<int32_t>(t));
    request.set_keys(tensor::PackKeys(shard_keys));
  }
  return wanted;
}

void KeyRouting::ShapeRows(workload::TableRows& rows) const {
  rows.resize(keys_.size());
  for (size_t t = 0; t < keys_.size(); ++t) {
    rows[t].resize(keys_[t].size() * static_cast<size_t>(table_dims_[t]));
  }
}

absl::Status KeyRouting::ScatterRows(
    int32_t shard, const google::protobuf::RepeatedPtrField<v1::SparseRows>& answered,
    workload::TableRows& rows) const {
  const std::vector<std::vector<uint32_t>>& routed = positions_[static_cast<size_t>(shard)];
  size_t asked = 0;
  for (const std::vector<uint32_t>& positions : routed) asked += positions.empty() ? 0 : 1;
  if (static_cast<size_t>(answered.size()) != asked) {
    return absl::DataLossError(absl::StrCat("shard ", shard, " answered ", answered.size(),
                                            " tables of rows; ", asked, " were asked for"));
  }
  std::vector<float> values;
  for (const v1::SparseRows& got : answered) {
    const size_t t = static_cast<size_t>(got.table());
    if (got.table() < 0 || t >= keys_.size() || routed[t].empty()) {
      return absl::DataLossError(absl::StrCat("shard ", shard, " answered rows of table ",
                                              got.table(), ", not asked for"));
    }
    const size_t dim = static_cast<size_t>(table_dims_[t]);
    const std::vector<uint32_t>& positions = routed[t];
    values.resize(positions.size() * dim);
    SYNCOPATE_RETURN_IF_ERROR(tensor::UnpackFloatsInto(got.values(), values));
    for (size_t k = 0; k < positions.size(); ++k) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(k * dim), dim,
                  rows[t].begin() + static_cast<std::ptrdiff_t>(positions[k] * dim));
    }
  }
  return absl::OkStatus();
}

absl::Status KeyRouting::SplitGradients(int32_t shard, const workload::TableRows& row_grads,
                                        std::vector<v1::SparseRows>& out) const {
  out.clear();
  if (row_grads.size() != keys_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradients of ", row_grads.size(), " tables of rows; the last pull routed ", keys_.size()));
  }
  for (size_t t = 0; t < keys_.size(); ++t) {
    const size_t dim = static_cast<size_t>(table_dims_[t]);
    if (row_grads[t].size() != keys_[t].size() * dim) {
      return absl::InvalidArgumentError(absl::StrCat("table ", t, ": ", row_grads[t].size(),
                                                     " gradient values for ", keys_[t].size(),
                                                     " rows of ", dim));
    }
    const std::vector<uint32_t>& positions = positions_[static_cast<size_t>(shard)][t];
    if (positions.empty()) continue;
    std::vector<uint64_t> shard_keys;
    std::vector<float> shard_rows;
    shard_keys.reserve(positions.size());
    shard_rows.reserve(positions.size() * dim);
    for (uint32_t k : positions) {
      shard_keys.push_back(keys_[t][k]);
      const auto row = row_grads[t].begin() + static_cast<std::ptrdiff_t>(k * dim);
      shard_rows.insert(shard_rows.end(), row, row + static_cast<std::ptrdiff_t>(dim));
    }
    v1::SparseRows& rows = out.emplace_back();
    rows.set_table(static_cast<int32_t>(t));
    rows.set_keys(tensor::PackKeys(shard_keys));
    rows.set_values(tensor::PackFloats(shard_rows));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::worker
