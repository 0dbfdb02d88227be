#include "libs/worker/key_routing.h"

#include <vector>

#include "gtest/gtest.h"
#include "libs/embedding/owner_shard.h"
#include "libs/tensor/packed.h"

namespace syncopate::worker {
namespace {

constexpr int32_t kShards = 3;

// Two tables of widths 2 and 3; 40 and 7 distinct keys in a scrambled order.
workload::TableKeys SomeKeys() {
  workload::TableKeys keys(2);
  for (uint64_t k = 0; k < 40; ++k) keys[0].push_back((k * 7919) % 1000);
  for (uint64_t k = 0; k < 7; ++k) keys[1].push_back(1000000 + 13 * k);
  return keys;
}

std::vector<uint64_t> Unpacked(const std::string& bytes) {
  std::vector<uint64_t> keys;
  EXPECT_TRUE(tensor::UnpackKeys(bytes, keys).ok());
  return keys;
}

// What a shard answers: row j of key k holds k * 10 + j, so a row shows where it landed.
v1::PullResponse Answer(const std::vector<v1::SparseRows>& requests,
                        const std::vector<int32_t>& dims) {
  v1::PullResponse response;
  for (const v1::SparseRows& request : requests) {
    std::vector<float> values;
    for (uint64_t key : Unpacked(request.keys())) {
      for (int32_t j = 0; j < dims[static_cast<size_t>(request.table())]; ++j) {
        values.push_back(static_cast<float>(key * 10 + static_cast<uint64_t>(j)));
      }
    }
    v1::SparseRows* rows = response.add_sparse();
    rows->set_table(request.table());
    rows->set_keys(request.keys());
    rows->set_values(tensor::PackFloats(values));
  }
  return response;
}

TEST(KeyRouting, SendsEveryKeyToItsOwnerInBatchOrder) {
  KeyRouting routing(kShards, {2, 3});
  const workload::TableKeys keys = SomeKeys();
  ASSERT_TRUE(routing.Route(&keys).ok());
  EXPECT_EQ(routing.tables(), 2u);
  std::vector<std::vector<uint64_t>> seen(2);
  for (int32_t s = 0; s < kShards; ++s) {
    int32_t previous_table = -1;
    for (const v1::SparseRows& request : routing.Requests(s)) {
      EXPECT_GT(request.table(), previous_table);  // one entry per table, in table order
      previous_table = request.table();
      const std::vector<uint64_t> shard_keys = Unpacked(request.keys());
      EXPECT_FALSE(shard_keys.empty());
      for (uint64_t key : shard_keys) {
        EXPECT_EQ(embedding::OwnerShard(key, kShards), s);
        seen[static_cast<size_t>(request.table())].push_back(key);
      }
    }
  }
  // Every key once; within a shard in the batch's order.
  for (size_t t = 0; t < 2; ++t) {
    std::vector<uint64_t> expected;
    for (int32_t s = 0; s < kShards; ++s) {
      for (uint64_t key : keys[t]) {
        if (embedding::OwnerShard(key, kShards) == s) expected.push_back(key);
      }
    }
    EXPECT_EQ(seen[t], expected) << "table " << t;
  }
}

TEST(KeyRouting, PutsTheShardsRowsBackInTheBatchOrder) {
  const std::vector<int32_t> dims = {2, 3};
  KeyRouting routing(kShards, dims);
  const workload::TableKeys keys = SomeKeys();
  ASSERT_TRUE(routing.Route(&keys).ok());
  workload::TableRows rows;
  routing.ShapeRows(rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].size(), 40u * 2);
  EXPECT_EQ(rows[1].size(), 7u * 3);
  for (int32_t s = 0; s < kShards; ++s) {
    ASSERT_TRUE(routing.ScatterRows(s, Answer(routing.Requests(s), dims).sparse(), rows).ok());
  }
  for (size_t t = 0; t < 2; ++t) {
    for (size_t k = 0; k < keys[t].size(); ++k) {
      for (size_t j = 0; j < static_cast<size_t>(dims[t]); ++j) {
        EXPECT_EQ(rows[t][k * static_cast<size_t>(dims[t]) + j],
                  static_cast<float>(keys[t][k] * 10 + j));
      }
    }
  }
}

TEST(KeyRouting, SplitsRowGradientsAlongTheSameRoutes) {
  const std::vector<int32_t> dims = {2, 3};
  KeyRouting routing(kShards, dims);
  const workload::TableKeys keys = SomeKeys();
  ASSERT_TRUE(routing.Route(&keys).ok());
  // The gradient of row k, element j: k * 10 + j again, now aligned with the batch's keys.
  workload::TableRows grads(2);
  for (size_t t = 0; t < 2; ++t) {
    for (uint64_t key : keys[t]) {
      for (int32_t j = 0; j < dims[t]; ++j) {
        grads[t].push_back(static_cast<float>(key * 10 + static_cast<uint64_t>(j)));
      }
    }
  }
  size_t pushed = 0;
  for (int32_t s = 0; s < kShards; ++s) {
    std::vector<v1::SparseRows> out;
    ASSERT_TRUE(routing.SplitGradients(s, grads, out).ok());
    // The push names the keys the pull asked this shard for, and each row is its key's.
    const std::vector<v1::SparseRows> requests = routing.Requests(s);
    ASSERT_EQ(out.size(), requests.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].table(), requests[i].table());
      EXPECT_EQ(out[i].keys(), requests[i].keys());
      const size_t dim = static_cast<size_t>(dims[static_cast<size_t>(out[i].table())]);
      const std::vector<uint64_t> shard_keys = Unpacked(out[i].keys());
      std::vector<float> values(shard_keys.size() * dim);
      ASSERT_TRUE(tensor::UnpackFloatsInto(out[i].values(), values).ok());
      for (size_t k = 0; k < shard_keys.size(); ++k) {
        for (size_t j = 0; j < dim; ++j) {
          EXPECT_EQ(values[k * dim + j], static_cast<float>(shard_keys[k] * 10 + j));
        }
      }
      pushed += shard_keys.size();
    }
  }
  EXPECT_EQ(pushed, 40u + 7u);
}

TEST(KeyRouting, ADensePullRoutesNothing) {
  KeyRouting routing(kShards, {});
  ASSERT_TRUE(routing.Route(nullptr).ok());
  const workload::TableKeys none;
  ASSERT_TRUE(routing.Route(&none).ok());
  EXPECT_EQ(routing.tables(), 0u);
  workload::TableRows rows(3);
  routing.ShapeRows(rows);
  EXPECT_TRUE(rows.empty());
  for (int32_t s = 0; s < kShards; ++s) {
    EXPECT_TRUE(routing.Requests(s).empty());
    EXPECT_TRUE(routing.ScatterRows(s, v1::PullResponse().sparse(), rows).ok());
    std::vector<v1::SparseRows> out;
    EXPECT_TRUE(routing.SplitGradients(s, {}, out).ok());
    EXPECT_TRUE(out.empty());
  }
}

TEST(KeyRouting, RefusesMismatchedTablesRowsAndGradients) {
  const std::vector<int32_t> dims = {2, 3};
  KeyRouting routing(kShards, dims);
  workload::TableKeys one_table(1, {1, 2, 3});
  EXPECT_EQ(routing.Route(&one_table).code(), absl::StatusCode::kInvalidArgument);

  const workload::TableKeys keys = SomeKeys();
  ASSERT_TRUE(routing.Route(&keys).ok());
  workload::TableRows rows;
  routing.ShapeRows(rows);
  // A shard answering a table it was not asked for, or fewer tables than asked.
  v1::PullResponse answer = Answer(routing.Requests(0), dims);
  v1::PullResponse extra = answer;
  extra.add_sparse()->set_table(7);
  EXPECT_EQ(routing.ScatterRows(0, extra.sparse(), rows).code(), absl::StatusCode::kDataLoss);
  v1::PullResponse fewer = answer;
  fewer.mutable_sparse()->RemoveLast();
  EXPECT_EQ(routing.ScatterRows(0, fewer.sparse(), rows).code(), absl::StatusCode::kDataLoss);

  std::vector<v1::SparseRows> out;
  EXPECT_EQ(routing.SplitGradients(0, workload::TableRows(1), out).code(),
            absl::StatusCode::kInvalidArgument);
  workload::TableRows short_rows(2);
  short_rows[0].resize(size_t{40} * 2);
  short_rows[1].resize(size_t{6} * 3);  // one row missing
  EXPECT_EQ(routing.SplitGradients(0, short_rows, out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::worker
