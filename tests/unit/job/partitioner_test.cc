#include "libs/job/partitioner.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"

namespace syncopate::job {
namespace {

model::DenseTensorSpec Tensor(std::string name, int64_t rows, int64_t cols,
                              v1::Initializer::Kind kind = v1::Initializer::ZEROS) {
  model::DenseTensorSpec t{.name = std::move(name), .rows = rows, .cols = cols, .init = {}};
  t.init.set_kind(kind);
  t.init.set_fan_in(cols);
  t.init.set_fan_out(rows);
  return t;
}

struct SliceSummary {
  std::string tensor;
  int64_t tensor_offset;
  int64_t flat_offset;
  int64_t length;
  bool operator==(const SliceSummary&) const = default;
};

void PrintTo(const SliceSummary& s, std::ostream* os) {
  *os << "{" << s.tensor << " @" << s.tensor_offset << " flat " << s.flat_offset << " len "
      << s.length << "}";
}

std::vector<SliceSummary> Slices(const v1::ShardPartition& p) {
  std::vector<SliceSummary> out;
  for (const v1::TensorSlice& s : p.slices()) {
    out.push_back({s.tensor(), s.tensor_offset(), s.flat_offset(), s.length()});
  }
  return out;
}

// Checks every structural promise of PartitionDense for `tensors` on `num_shards` shards, and
// rebuilds each tensor from the slices: every element must come back exactly once, in place.
void ExpectSoundPartition(const std::vector<model::DenseTensorSpec>& tensors, int num_shards) {
  SCOPED_TRACE(testing::Message() << tensors.size() << " tensors on " << num_shards << " shards");
  absl::StatusOr<std::vector<v1::ShardPartition>> parts = PartitionDense(tensors, num_shards);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), static_cast<size_t>(num_shards));

  // The flat vector holds, for every element, a code of (tensor, offset).
  std::vector<int64_t> flat;
  std::map<std::string, int64_t> tensor_start;
  std::map<std::string, const model::DenseTensorSpec*> by_name;
  for (size_t t = 0; t < tensors.size(); ++t) {
    tensor_start[tensors[t].name] = static_cast<int64_t>(flat.size());
    by_name[tensors[t].name] = &tensors[t];
    for (int64_t i = 0; i < tensors[t].size(); ++i) {
      flat.push_back(static_cast<int64_t>(t) * 1'000'000 + i);
    }
  }
  const int64_t total = static_cast<int64_t>(flat.size());

  int64_t min_size = INT64_MAX, max_size = 0, expected_begin = 0;
  std::map<std::string, std::vector<int64_t>> rebuilt;
  for (const model::DenseTensorSpec& t : tensors) rebuilt[t.name].assign(t.size(), -1);
  for (int s = 0; s < num_shards; ++s) {
    const v1::ShardPartition& p = (*parts)[s];
    EXPECT_EQ(p.shard_id(), s);
    EXPECT_EQ(p.flat_begin(), expected_begin) << "ranges must be contiguous";
    EXPECT_GT(p.flat_end(), p.flat_begin());
    expected_begin = p.flat_end();
    min_size = std::min(min_size, p.flat_end() - p.flat_begin());
    max_size = std::max(max_size, p.flat_end() - p.flat_begin());
    // Slices tile the shard's range in flat order.
    int64_t cursor = p.flat_begin();
    for (const v1::TensorSlice& slice : p.slices()) {
      EXPECT_EQ(slice.flat_offset(), cursor);
      EXPECT_GT(slice.length(), 0);
      cursor += slice.length();
      ASSERT_TRUE(by_name.contains(slice.tensor())) << slice.tensor();
      const model::DenseTensorSpec& t = *by_name[slice.tensor()];
      EXPECT_EQ(slice.init().kind(), t.init.kind());
      EXPECT_EQ(slice.init().fan_in(), t.init.fan_in());
      EXPECT_EQ(slice.flat_offset(), tensor_start[t.name] + slice.tensor_offset());
      ASSERT_LE(slice.tensor_offset() + slice.length(), t.size());
      for (int64_t i = 0; i < slice.length(); ++i) {
        int64_t& cell = rebuilt[t.name][slice.tensor_offset() + i];
        EXPECT_EQ(cell, -1) << "element placed twice";
        cell = flat[slice.flat_offset() + i];
      }
    }
    EXPECT_EQ(cursor, p.flat_end()) << "slices must cover the whole range";
  }
  EXPECT_EQ(expected_begin, total) << "ranges must cover every parameter";
  EXPECT_LE(max_size - min_size, 1);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const std::vector<int64_t>& values = rebuilt[tensors[t].name];
    for (int64_t i = 0; i < tensors[t].size(); ++i) {
      ASSERT_EQ(values[i], static_cast<int64_t>(t) * 1'000'000 + i)
          << tensors[t].name << "[" << i << "]";
    }
  }
}

TEST(PartitionDense, CutsTensorsAtShardBoundaries) {
  // 6 + 3 + 4 = 13 parameters on 3 shards: [0, 4), [4, 8), [8, 13).
  const std::vector<model::DenseTensorSpec> tensors = {Tensor("a", 2, 3), Tensor("b", 1, 3),
                                                       Tensor("c", 4, 1)};
  absl::StatusOr<std::vector<v1::ShardPartition>> parts = PartitionDense(tensors, 3);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].flat_begin(), 0);
  EXPECT_EQ((*parts)[0].flat_end(), 4);
  EXPECT_EQ((*parts)[1].flat_begin(), 4);
  EXPECT_EQ((*parts)[1].flat_end(), 8);
  EXPECT_EQ((*parts)[2].flat_begin(), 8);
  EXPECT_EQ((*parts)[2].flat_end(), 13);
  using S = SliceSummary;
  EXPECT_THAT(Slices((*parts)[0]), testing::ElementsAre(S{"a", 0, 0, 4}));
  EXPECT_THAT(Slices((*parts)[1]), testing::ElementsAre(S{"a", 4, 4, 2}, S{"b", 0, 6, 2}));
  EXPECT_THAT(Slices((*parts)[2]), testing::ElementsAre(S{"b", 2, 8, 1}, S{"c", 0, 9, 4}));
}

TEST(PartitionDense, OneShardHoldsEveryTensorWhole) {
  const std::vector<model::DenseTensorSpec> tensors = {Tensor("w", 3, 2), Tensor("b", 3, 1)};
  absl::StatusOr<std::vector<v1::ShardPartition>> parts = PartitionDense(tensors, 1);
  ASSERT_TRUE(parts.ok());
  using S = SliceSummary;
  EXPECT_THAT(Slices((*parts)[0]), testing::ElementsAre(S{"w", 0, 0, 6}, S{"b", 0, 6, 3}));
}

TEST(PartitionDense, RangesAreSoundForManyShapes) {
  const std::vector<model::DenseTensorSpec> tensors = {
      Tensor("dense0/w", 7, 5, v1::Initializer::HE_UNIFORM), Tensor("dense0/b", 7, 1),
      Tensor("dense1/w", 3, 7, v1::Initializer::GLOROT_UNIFORM), Tensor("dense1/b", 3, 1)};
  for (int shards = 1; shards <= 66; ++shards) ExpectSoundPartition(tensors, shards);
  // One shard per parameter: every shard holds exactly one element.
  ExpectSoundPartition({Tensor("x", 2, 2), Tensor("y", 1, 1)}, 5);
  // A tensor that spans three shards.
  ExpectSoundPartition({Tensor("small", 1, 1), Tensor("big", 10, 10), Tensor("tail", 1, 2)}, 4);
}

TEST(PartitionDense, DefaultModelSplitsEvenly) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<model::Mlp> mlp = ModelForJob(*spec);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  // 784*256 + 256 + 256*128 + 128 + 128*10 + 10
  ASSERT_EQ(mlp->num_parameters(), 235146);
  ExpectSoundPartition(mlp->tensors(), 2);
  ExpectSoundPartition(mlp->tensors(), 7);
}

TEST(PartitionDense, MoreShardsThanParametersIsAnError) {
  const std::vector<model::DenseTensorSpec> tensors = {Tensor("a", 1, 3)};
  absl::StatusOr<std::vector<v1::ShardPartition>> parts = PartitionDense(tensors, 4);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parts.status().message()), testing::HasSubstr("3 parameters"));
  EXPECT_TRUE(PartitionDense(tensors, 3).ok());
}

TEST(PartitionDense, NonPositiveShardCountIsAnError) {
  const std::vector<model::DenseTensorSpec> tensors = {Tensor("a", 2, 2)};
  EXPECT_EQ(PartitionDense(tensors, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionDense(tensors, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::job
