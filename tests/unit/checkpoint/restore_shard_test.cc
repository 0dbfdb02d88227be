// checkpoint::RestoreShard on hand-made checkpoints: the arithmetic of re-sharding without a
// shard (tests/unit/checkpoint/shard_restore_test.cc covers it through ShardCore end to end).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/checkpoint/shard_restore.h"
#include "libs/embedding/owner_shard.h"
#include "libs/tensor/packed.h"
#include "tests/fuzz/small_assignment.h"

namespace syncopate::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The target: flat [10, 14) = w[0..3) then b[0..1), momentum (one state vector), table "emb"
// of width 2, shard 1 of 2.
class RestoreShardTest : public ::testing::Test {
 protected:
  RestoreShardTest()
      : assignment_(fuzz::SmallAssignment(v1::MODE_SYNC, /*momentum=*/true)),
        rule_(*optim::CreateUpdateRule(assignment_.job().optimizer())) {
    target_.assignment = &assignment_;
    target_.optimizer = std::string(rule_->name());
    target_.optimizer_vectors = rule_->num_slots();
    target_.row_rule = rule_.get();
  }

  // A checkpoint holding tensor[offset, offset + values.size()) with velocity = 10 × value.
  static v1::ShardCheckpoint Source(const std::string& tensor, int64_t offset,
                                    std::vector<float> values, int64_t version) {
    v1::ShardCheckpoint c;
    c.set_job_id(fuzz::SmallAssignment(v1::MODE_SYNC, true).job().job_id());
    c.set_optimizer("momentum");
    c.set_version(version);
    c.set_optimizer_steps(version * 2);
    AddSlice(c, tensor, offset, std::move(values));
    return c;
  }
  static void AddSlice(v1::ShardCheckpoint& c, const std::string& tensor, int64_t offset,
                       std::vector<float> values) {
    v1::CheckpointSlice* s = c.add_slices();
    s->set_tensor(tensor);
    s->set_tensor_offset(offset);
    s->set_length(static_cast<int64_t>(values.size()));
    s->set_values(tensor::PackFloats(values));
    for (float& v : values) v *= 10;
    s->add_optimizer_state(tensor::PackFloats(values));
  }

  v1::ShardAssignment assignment_;
  std::unique_ptr<optim::UpdateRule> rule_;
  RestoreTarget target_;
};

// w was split [0, 2) + [2, 5) on two old shards (the tensor was longer there than the target's
// slice needs); b came whole. Version and steps are the newest source's.
TEST_F(RestoreShardTest, FillsEachSliceFromTheOverlappingSources) {
  v1::ShardCheckpoint a = Source("w", 0, {1, 2}, 4);
  v1::ShardCheckpoint b = Source("w", 2, {3, 4, 5}, 6);
  AddSlice(b, "b", 0, {9});
  absl::StatusOr<RestoredShard> restored = RestoreShard(target_, {a, b});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->parameters, ElementsAre(1, 2, 3, 9));
  ASSERT_EQ(restored->optimizer_state.size(), 1u);
  EXPECT_THAT(restored->optimizer_state[0], ElementsAre(10, 20, 30, 90));
  EXPECT_EQ(restored->version, 6);
  EXPECT_EQ(restored->optimizer_steps, 12);
  ASSERT_EQ(restored->tables.size(), 1u);
  EXPECT_EQ(restored->tables[0]->size(), 0);
}

TEST_F(RestoreShardTest, GapsAndDoubleCoverageAreRefused) {
  absl::StatusOr<RestoredShard> gap = RestoreShard(target_, {Source("w", 0, {1, 2, 3}, 1)});
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), HasSubstr("cover 3 of the 4"));
  v1::ShardCheckpoint whole = Source("w", 0, {1, 2, 3}, 1);
  AddSlice(whole, "b", 0, {4});
  absl::StatusOr<RestoredShard> twice = RestoreShard(target_, {whole, Source("b", 0, {5}, 1)});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.status().message(), HasSubstr("flat offset 13 of shard 1 twice"));
}

TEST_F(RestoreShardTest, ForeignOrInconsistentSourcesAreRefused) {
  v1::ShardCheckpoint whole = Source("w", 0, {1, 2, 3}, 1);
  AddSlice(whole, "b", 0, {4});
  ASSERT_TRUE(RestoreShard(target_, {whole}).ok());

  v1::ShardCheckpoint other_job = whole;
  other_job.set_job_id("another");
  EXPECT_EQ(RestoreShard(target_, {other_job}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::ShardCheckpoint other_optimizer = whole;
  other_optimizer.set_optimizer("adam");
  EXPECT_EQ(RestoreShard(target_, {other_optimizer}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::ShardCheckpoint lying = whole;
  lying.mutable_slices(0)->set_length(int64_t{1} << 40);  // claims 4 TiB of values
  EXPECT_EQ(RestoreShard(target_, {lying}).status().code(), absl::StatusCode::kDataLoss);
  v1::ShardCheckpoint no_state = whole;
  no_state.mutable_slices(0)->clear_optimizer_state();
  EXPECT_EQ(RestoreShard(target_, {no_state}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A checkpoint holding a tensor the job's model lacks (its layout record, which the coordinator
// fills in) was written for another model: restoring the rest would silently drop that part of
// the model, e.g. a DeepFM's "fm/numeric" from before model.fm_fields (ADR 0020).
TEST_F(RestoreShardTest, TensorsTheModelLacksAreRefused) {
  v1::ShardCheckpoint whole = Source("w", 0, {1, 2, 3}, 1);
  AddSlice(whole, "b", 0, {4});
  AddSlice(whole, "fm/numeric", 0, {7, 8});
  // Without a layout record (a job the coordinator did not fill in) nothing can be checked.
  ASSERT_TRUE(RestoreShard(target_, {whole}).ok());
  v1::ModelLayoutRecord& layout = *assignment_.mutable_job()->mutable_model()->mutable_layout();
  v1::TensorShape* w = layout.add_dense();
  w->set_name("w");
  w->add_shape(3);
  v1::TensorShape* b = layout.add_dense();
  b->set_name("b");
  b->add_shape(1);
  absl::StatusOr<RestoredShard> refused = RestoreShard(target_, {whole});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("checkpoint holds tensor 'fm/numeric', which the job's model does not "
                        "have: it was written for another model layout (a DeepFM checkpoint "
                        "from before model.fm_fields needs CATEGORICAL_AND_NUMERIC)"));
  whole.mutable_slices()->RemoveLast();
  EXPECT_TRUE(RestoreShard(target_, {whole}).ok());
  // A tensor the model has in a smaller size (a DCN's cross layers from before
  // model.cross_fields, ADR 0021) would be copied into the wrong elements: refused too.
  layout.mutable_dense(0)->set_name("cross0/w");
  layout.mutable_dense(0)->set_shape(0, 2);
  whole.mutable_slices(0)->set_tensor("cross0/w");
  refused = RestoreShard(target_, {whole});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("checkpoint holds tensor 'cross0/w' with more than the 2 elements the "
                        "job's model gives it: it was written for another model layout (a DCN "
                        "checkpoint from before model.cross_fields needs "
                        "CATEGORICAL_AND_NUMERIC)"));
}

// Rows go to the shard that owns their key under the target's partitioning; others are left out.
TEST_F(RestoreShardTest, RowsAreKeptOnlyWhereTheyAreOwned) {
  v1::ShardCheckpoint whole = Source("w", 0, {1, 2, 3}, 1);
  AddSlice(whole, "b", 0, {4});
  std::vector<uint64_t> keys;
  uint64_t owned = 0;
  for (uint64_t k = 1; keys.size() < 6; ++k) {
    keys.push_back(k);
    if (embedding::OwnerShard(k, 2) == 1 && owned == 0) owned = k;
  }
  int expected = 0;
  for (uint64_t k : keys) expected += embedding::OwnerShard(k, 2) == 1 ? 1 : 0;
  ASSERT_GT(expected, 0);
  std::vector<float> values(keys.size() * 2), velocity(keys.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(i);
    velocity[i] = 100 + static_cast<float>(i);
  }
  v1::EmbeddingSlice* rows = whole.add_embeddings();
  rows->set_table("emb");
  rows->set_dim(2);
  rows->set_keys(tensor::PackKeys(keys));
  rows->set_values(tensor::PackFloats(values));
  rows->add_optimizer_state(tensor::PackFloats(velocity));
  absl::StatusOr<RestoredShard> restored = RestoreShard(target_, {whole});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->tables[0]->size(), expected);
  const size_t i = static_cast<size_t>(owned - 1);
  std::vector<float> row(2);
  restored->tables[0]->Peek(owned, row);
  EXPECT_THAT(row, ElementsAre(values[2 * i], values[2 * i + 1]));

  rows->set_dim(3);
  EXPECT_EQ(RestoreShard(target_, {whole}).status().code(), absl::StatusCode::kFailedPrecondition);
  rows->set_dim(2);
  rows->set_table("missing");
  EXPECT_EQ(RestoreShard(target_, {whole}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace syncopate::checkpoint
