// The shard's embedding tables: rows owned by key hash, created on first touch, sparse pushes
// aggregated under the global-batch rule, every malformed row request rejected and counted, and
// checkpoints that restore onto a different number of shards.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/embedding/embedding_table.h"
#include "libs/embedding/owner_shard.h"
#include "libs/shard/shard_core.h"
#include "libs/shard/shard_metrics.h"
#include "libs/tensor/packed.h"
#include "prometheus/registry.h"

namespace syncopate::shard {
namespace {

using ::testing::FloatEq;
using ::testing::Pointwise;

constexpr int kDim = 2;
constexpr float kLearningRate = 0.5f;

// Dense "w" of 2 elements split one per shard; table "emb" (width 2, U(-0.1, 0.1)) on every
// shard. SGD, G = 4, workers 1 and 2 with local batch 2.
v1::ShardAssignment Assignment(int32_t shard_id, int32_t num_shards, v1::Mode mode,
                               v1::OptimizerSpec::Kind optimizer = v1::OptimizerSpec::SGD) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.set_job_id("ctr");
  job.mutable_optimizer()->set_kind(optimizer);
  job.mutable_optimizer()->set_learning_rate(kLearningRate);
  job.set_global_batch(4);
  job.set_num_workers(2);
  job.set_num_shards(num_shards);
  job.set_mode(mode);
  job.set_seed(7);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_shard_id(shard_id);
  // The dense tensor "w" has num_shards elements, one per shard.
  p.set_flat_begin(shard_id);
  p.set_flat_end(shard_id + 1);
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor("w");
  slice->set_tensor_offset(shard_id);
  slice->set_flat_offset(shard_id);
  slice->set_length(1);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  v1::EmbeddingTableSpec* table = p.add_tables();
  table->set_name("emb");
  table->set_dim(kDim);
  table->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  table->mutable_init()->set_scale(0.1);
  v1::Membership& m = *a.mutable_membership();
  m.set_generation(1);
  m.add_worker_ids(1);
  m.add_worker_ids(2);
  m.set_local_batch(2);
  a.set_mode(mode);
  return a;
}

// `count` keys that `shard` of `num_shards` owns.
std::vector<uint64_t> OwnedKeys(int32_t shard, int32_t num_shards, int count, uint64_t from = 1) {
  std::vector<uint64_t> keys;
  for (uint64_t k = from; static_cast<int>(keys.size()) < count; ++k) {
    if (embedding::OwnerShard(k, num_shards) == shard) keys.push_back(k);
  }
  return keys;
}

v1::SparseRows Rows(int32_t table, const std::vector<uint64_t>& keys,
                    const std::vector<float>& values = {}) {
  v1::SparseRows rows;
  rows.set_table(table);
  rows.set_keys(tensor::PackKeys(keys));
  if (!values.empty()) rows.set_values(tensor::PackFloats(values));
  return rows;
}

v1::PushRequest Push(int64_t token, int64_t samples, std::vector<v1::SparseRows> sparse) {
  v1::PushRequest push;
  push.set_request_id(1);
  push.set_token(token);
  push.set_samples(samples);
  push.set_gradient(tensor::PackFloats(std::vector<float>{0.0f}));
  for (v1::SparseRows& rows : sparse) *push.add_sparse() = std::move(rows);
  return push;
}

std::vector<float> Unpack(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  EXPECT_TRUE(tensor::UnpackFloatsInto(bytes, values).ok());
  return values;
}

class ShardEmbeddingTest : public ::testing::Test {
 protected:
  std::unique_ptr<ShardCore> Make(int32_t shard, int32_t num_shards, v1::Mode mode,
                                  v1::OptimizerSpec::Kind optimizer = v1::OptimizerSpec::SGD,
                                  ShardMetrics* metrics = nullptr) {
    absl::StatusOr<std::unique_ptr<ShardCore>> core =
        ShardCore::Create(Assignment(shard, num_shards, mode, optimizer), &clock_, metrics);
    EXPECT_TRUE(core.ok()) << core.status();
    return core.ok() ? std::move(*core) : nullptr;
  }

  // Pulls `keys` of table 0; the response's rows, or nullopt when the pull was refused.
  std::optional<std::vector<float>> PullRows(ShardCore& core, const std::vector<uint64_t>& keys,
                                             bool create = true) {
    v1::PullRequest request;
    request.set_request_id(9);
    *request.add_sparse() = Rows(0, keys);
    std::optional<v1::PullResponse> response;
    absl::Status status = core.Pull({this, -1, create}, request,
                                    [&](PullReply r) { response = std::move(r).ToMessage(); });
    if (!status.ok()) return std::nullopt;
    EXPECT_TRUE(response.has_value());
    EXPECT_EQ(response->sparse_size(), 1);
    EXPECT_EQ(response->sparse(0).keys(), tensor::PackKeys(keys));
    return Unpack(response->sparse(0).values());
  }

  FakeClock clock_;
};

TEST_F(ShardEmbeddingTest, RowsAreCreatedOnFirstTouchWithTheInitializer) {
  auto core = Make(0, 2, v1::MODE_SYNC);
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 3);
  // The evaluator's read does not create rows.
  std::optional<std::vector<float>> peeked = PullRows(*core, keys, /*create=*/false);
  ASSERT_TRUE(peeked.has_value());
  EXPECT_EQ(core->Stats().embedding_rows, 0);
  std::optional<std::vector<float>> pulled = PullRows(*core, keys);
  ASSERT_TRUE(pulled.has_value());
  EXPECT_EQ(core->Stats().embedding_rows, 3);
  EXPECT_EQ(*peeked, *pulled);  // the initial value is a function of (seed, table, key)
  for (float x : *pulled) {
    EXPECT_LE(std::abs(x), 0.1f);
    EXPECT_NE(x, 0.0f);
  }
  // Another shard count, another owner: the same key initialises identically anywhere.
  auto other = Make(1, 3, v1::MODE_SYNC);
  const uint64_t key = OwnedKeys(1, 3, 1)[0];
  std::vector<float> here = core->EmbeddingRow(0, key);
  std::vector<float> there = other->EmbeddingRow(0, key);
  EXPECT_EQ(here, there);
}

TEST_F(ShardEmbeddingTest, SparseGradientsFollowTheGlobalBatchRuleInSync) {
  auto core = Make(0, 2, v1::MODE_SYNC);
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 2);
  const std::vector<float> before = *PullRows(*core, keys);
  // Worker 1 (2 samples) touches both rows; worker 2 (2 samples) only the first.
  EXPECT_EQ(core->Push(1, Push(0, 2, {Rows(0, keys, {1, 1, 4, 8})})).outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(core->Stats().version, 0);
  EXPECT_EQ(core->Push(2, Push(0, 2, {Rows(0, {keys[0]}, {3, 3})})).outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(core->Stats().version, 1);
  // Means over the global batch of 4: row 0 (2*1 + 2*3)/4 = 2, row 1 2*(4, 8)/4 = (2, 4).
  const std::vector<float> after = *PullRows(*core, keys);
  EXPECT_THAT(after, Pointwise(FloatEq(), std::vector<float>{before[0] - kLearningRate * 2,
                                                             before[1] - kLearningRate * 2,
                                                             before[2] - kLearningRate * 2,
                                                             before[3] - kLearningRate * 4}));
}

TEST_F(ShardEmbeddingTest, LazyAdagradLeavesUntouchedRowsAlone) {
  auto core = Make(0, 2, v1::MODE_ASYNC, v1::OptimizerSpec::ADAGRAD);
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 2);
  const std::vector<float> before = *PullRows(*core, keys);
  core->Push(1, Push(0, 2, {Rows(0, {keys[0]}, {1, -1})}));
  const std::vector<float> after = *PullRows(*core, keys);
  EXPECT_LT(after[0], before[0]);
  EXPECT_GT(after[1], before[1]);
  EXPECT_EQ(after[2], before[2]);
  EXPECT_EQ(after[3], before[3]);
}

TEST_F(ShardEmbeddingTest, MalformedRowsAreRejectedCountedAndNeverApplied) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, 0);
  auto core = Make(0, 2, v1::MODE_ASYNC, v1::OptimizerSpec::SGD, &metrics);
  const std::vector<uint64_t> mine = OwnedKeys(0, 2, 2);
  const std::vector<uint64_t> theirs = OwnedKeys(1, 2, 1);
  const std::vector<float> before = *PullRows(*core, mine);
  struct Case {
    std::string name;
    v1::PushRequest push;
    std::string reason;
  };
  v1::SparseRows partial_key = Rows(0, mine, {1, 1, 1, 1});
  partial_key.set_keys(partial_key.keys().substr(0, 12));
  const std::vector<Case> cases = {
      {"unknown table", Push(0, 2, {Rows(3, mine, {1, 1, 1, 1})}), "wrong_shape"},
      {"negative table", Push(0, 2, {Rows(-1, mine, {1, 1, 1, 1})}), "wrong_shape"},
      {"partial key", Push(0, 2, {partial_key}), "wrong_shape"},
      {"rows too short", Push(0, 2, {Rows(0, mine, {1, 1, 1})}), "wrong_shape"},
      {"key of another shard", Push(0, 2, {Rows(0, theirs, {1, 1})}), "wrong_shard"},
      {"NaN in a row", Push(0, 2, {Rows(0, mine, {1, NAN, 1, 1})}), "non_finite"},
      {"Inf in a row", Push(0, 2, {Rows(0, mine, {1, 1, INFINITY, 1})}), "non_finite"},
      {"key twice", Push(0, 2, {Rows(0, {mine[0], mine[0]}, {1, 1, 1, 1})}), "duplicate_key"},
      {"table twice", Push(0, 2, {Rows(0, {mine[0]}, {1, 1}), Rows(0, {mine[1]}, {1, 1})}),
       "wrong_shape"},
  };
  for (const Case& c : cases) {
    const v1::PushAck ack = core->Push(1, c.push);
    EXPECT_EQ(ack.outcome(), v1::PUSH_REJECTED) << c.name;
    EXPECT_EQ(ack.code(), static_cast<int>(absl::StatusCode::kInvalidArgument)) << c.name;
  }
  EXPECT_EQ(*PullRows(*core, mine), before);
  EXPECT_EQ(core->Stats().version, 0);
  EXPECT_EQ(core->Stats().gradients.rejected(), static_cast<int64_t>(cases.size()));
  // A pull for another shard's key is refused (and counted) too.
  EXPECT_FALSE(PullRows(*core, theirs).has_value());
  std::map<std::string, double> counted;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != "syncopate_shard_rejections_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "reason") counted[label.value] = metric.counter.value;
      }
    }
  }
  EXPECT_EQ(counted["wrong_shape"], 5);
  EXPECT_EQ(counted["wrong_shard"], 2);
  EXPECT_EQ(counted["non_finite"], 2);
  EXPECT_EQ(counted["duplicate_key"], 1);
  double rows = -1;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name == "syncopate_shard_embedding_rows") rows = family.metric[0].gauge.value;
  }
  EXPECT_EQ(rows, 2) << "the two rows pulled, nothing from the rejected pushes";
}

TEST_F(ShardEmbeddingTest, CheckpointOfTwoShardsRestoresOntoThree) {
  // Train a little on 2 shards, snapshot both, restore onto 3: every row lands on its new
  // owner with its value and optimizer state, and the version carries over.
  std::vector<std::unique_ptr<ShardCore>> old(2);
  for (int s = 0; s < 2; ++s) old[s] = Make(s, 2, v1::MODE_ASYNC, v1::OptimizerSpec::ADAGRAD);
  std::vector<uint64_t> keys(40);
  std::iota(keys.begin(), keys.end(), uint64_t{1});
  for (int s = 0; s < 2; ++s) {
    std::vector<uint64_t> owned;
    std::vector<float> grad;
    for (uint64_t k : keys) {
      if (embedding::OwnerShard(k, 2) != s) continue;
      owned.push_back(k);
      grad.push_back(0.01f * static_cast<float>(k));
      grad.push_back(-0.02f);
    }
    EXPECT_EQ(old[s]->Push(1, Push(0, 2, {Rows(0, owned, grad)})).outcome(), v1::PUSH_APPLIED);
  }
  std::vector<v1::ShardCheckpoint> sources = {old[0]->Snapshot(), old[1]->Snapshot()};
  ASSERT_EQ(sources[0].embeddings_size(), 1);
  EXPECT_EQ(sources[0].optimizer_steps(), 1);

  int64_t restored_rows = 0;
  for (int s = 0; s < 3; ++s) {
    v1::ShardAssignment a = Assignment(s, 3, v1::MODE_ASYNC, v1::OptimizerSpec::ADAGRAD);
    // The dense tensor "w" is cut differently on 3 shards; give each new shard the elements
    // the 2-shard checkpoint holds (0 and 1) so only the embedding layout differs.
    a.mutable_partition()->set_flat_begin(0);
    a.mutable_partition()->set_flat_end(2);
    a.mutable_partition()->mutable_slices(0)->set_tensor_offset(0);
    a.mutable_partition()->mutable_slices(0)->set_flat_offset(0);
    a.mutable_partition()->mutable_slices(0)->set_length(2);
    absl::StatusOr<std::unique_ptr<ShardCore>> fresh = ShardCore::Create(a, &clock_, nullptr);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    ASSERT_TRUE((*fresh)->Restore(sources).ok());
    EXPECT_EQ((*fresh)->Stats().version, 1);
    restored_rows += (*fresh)->Stats().embedding_rows;
    for (uint64_t k : keys) {
      if (embedding::OwnerShard(k, 3) != s) continue;
      EXPECT_EQ((*fresh)->EmbeddingRow(0, k), old[embedding::OwnerShard(k, 2)]->EmbeddingRow(0, k))
          << "key " << k;
    }
    // Adagrad's accumulators came along: the next identical step moves a row less than the
    // first did.
    const v1::ShardCheckpoint snapshot = (*fresh)->Snapshot();
    EXPECT_EQ(snapshot.optimizer_steps(), 1);
  }
  EXPECT_EQ(restored_rows, 40);
}

TEST_F(ShardEmbeddingTest, InconsistentEmbeddingCheckpointIsRefusedAndChangesNothing) {
  auto core = Make(0, 2, v1::MODE_ASYNC);
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 2);
  core->Push(1, Push(0, 2, {Rows(0, keys, {1, 1, 1, 1})}));
  v1::ShardCheckpoint good = core->Snapshot();
  v1::ShardCheckpoint other = Make(1, 2, v1::MODE_ASYNC)->Snapshot();
  const std::vector<float> row = core->EmbeddingRow(0, keys[0]);

  v1::ShardCheckpoint truncated = good;
  truncated.mutable_embeddings(0)->mutable_values()->resize(5);
  EXPECT_EQ(core->Restore({truncated, other}).code(), absl::StatusCode::kDataLoss);
  v1::ShardCheckpoint wrong_dim = good;
  wrong_dim.mutable_embeddings(0)->set_dim(3);
  EXPECT_EQ(core->Restore({wrong_dim, other}).code(), absl::StatusCode::kFailedPrecondition);
  v1::ShardCheckpoint unknown = good;
  unknown.mutable_embeddings(0)->set_table("nope");
  EXPECT_EQ(core->Restore({unknown, other}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core->EmbeddingRow(0, keys[0]), row);
  EXPECT_EQ(core->Stats().embedding_rows, 2);
  ASSERT_TRUE(core->Restore({good, other}).ok());
  EXPECT_EQ(core->EmbeddingRow(0, keys[0]), row);
}

// The value of every sample of `name` whose labels include `label`=`value` (or all samples
// when `label` is empty), summed.
double MetricValue(prometheus::Registry& registry, const std::string& name,
                   const std::string& label = "", const std::string& value = "") {
  double sum = 0;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      bool match = label.empty();
      for (const prometheus::ClientMetric::Label& l : metric.label) {
        match = match || (l.name == label && l.value == value);
      }
      if (match) sum += metric.counter.value + metric.gauge.value;
    }
  }
  return sum;
}

// Scenario: with admit_after_count 3 and evict_after_updates 100, keys pulled twice have no row
// and their gradients are dropped; a checkpoint of 2 shards restored onto 3 keeps each admitted
// row's idle time and each pending key's sightings (its next sighting on its new owner admits
// it), and the shard's metrics count all of it.
TEST_F(ShardEmbeddingTest, AdmissionAndIdleTimesSurviveRestoreOntoThreeShards) {
  const auto limited = [](int32_t shard, int32_t num_shards) {
    v1::ShardAssignment a =
        Assignment(shard, num_shards, v1::MODE_ASYNC, v1::OptimizerSpec::ADAGRAD);
    a.mutable_partition()->mutable_tables(0)->set_admit_after_count(3);
    a.mutable_partition()->mutable_tables(0)->set_evict_after_updates(100);
    return a;
  };
  prometheus::Registry registry;
  ShardMetrics metrics(registry, 0);
  std::vector<std::unique_ptr<ShardCore>> old(2);
  std::vector<uint64_t> pending, admitted;
  for (int s = 0; s < 2; ++s) {
    old[s] = *ShardCore::Create(limited(s, 2), &clock_, s == 0 ? &metrics : nullptr);
    const std::vector<uint64_t> owned = OwnedKeys(s, 2, 20);
    const std::vector<uint64_t> seen_twice(owned.begin(), owned.begin() + 10);
    const std::vector<uint64_t> seen_thrice(owned.begin() + 10, owned.end());
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(*PullRows(*old[s], seen_twice), std::vector<float>(size_t{10} * kDim, 0.0f))
          << "not admitted: zeros";
    }
    for (int i = 0; i < 3; ++i) PullRows(*old[s], seen_thrice);
    EXPECT_EQ(old[s]->Stats().embedding_rows, 10);
    // One update with every key's gradient (the pending keys' are dropped), then two without
    // rows: the admitted rows are idle for 2 updates at the checkpoint.
    const std::vector<float> grad(owned.size() * kDim, 0.5f);
    EXPECT_EQ(old[s]->Push(1, Push(0, 4, {Rows(0, owned, grad)})).outcome(), v1::PUSH_APPLIED);
    for (int64_t token = 1; token <= 2; ++token) {
      EXPECT_EQ(old[s]->Push(1, Push(token, 4, {})).outcome(), v1::PUSH_APPLIED);
    }
    EXPECT_EQ(old[s]->Stats().embedding_rows, 10);
    pending.insert(pending.end(), seen_twice.begin(), seen_twice.end());
    admitted.insert(admitted.end(), seen_thrice.begin(), seen_thrice.end());
  }
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_embedding_admitted_total"), 10);
  // Shard 0's lookups before admission: 2 for each of its 20 keys.
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_embedding_unadmitted_total", "kind", "lookup"),
            40);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_embedding_unadmitted_total", "kind", "gradient"),
            10);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_embedding_table_rows", "table", "emb"), 10);
  EXPECT_GT(MetricValue(registry, "syncopate_shard_embedding_table_bytes", "table", "emb"),
            embedding::AdmissionSketch::kDepth * embedding::AdmissionSketch::kWidth);

  std::vector<v1::ShardCheckpoint> sources = {old[0]->Snapshot(), old[1]->Snapshot()};
  ASSERT_TRUE(sources[0].embeddings(0).has_admission());
  int64_t restored_rows = 0;
  for (int s = 0; s < 3; ++s) {
    v1::ShardAssignment a = limited(s, 3);
    // As in CheckpointOfTwoShardsRestoresOntoThree: only the embedding layout differs.
    a.mutable_partition()->set_flat_begin(0);
    a.mutable_partition()->set_flat_end(2);
    a.mutable_partition()->mutable_slices(0)->set_tensor_offset(0);
    a.mutable_partition()->mutable_slices(0)->set_flat_offset(0);
    a.mutable_partition()->mutable_slices(0)->set_length(2);
    std::unique_ptr<ShardCore> fresh = *ShardCore::Create(a, &clock_, nullptr);
    ASSERT_TRUE(fresh->Restore(sources).ok());
    restored_rows += fresh->Stats().embedding_rows;
    const v1::ShardCheckpoint again = fresh->Snapshot();
    std::vector<uint64_t> touched;
    ASSERT_TRUE(tensor::UnpackKeys(again.embeddings(0).last_touched(), touched).ok());
    for (const uint64_t step : touched) {
      EXPECT_EQ(again.optimizer_steps() - static_cast<int64_t>(step), 2) << "idle time kept";
    }
    for (const uint64_t key : pending) {
      if (embedding::OwnerShard(key, 3) != s) continue;
      const std::vector<float> row = *PullRows(*fresh, {key});
      EXPECT_NE(row, std::vector<float>(kDim, 0.0f)) << "key " << key << " admitted on its third";
      EXPECT_EQ(row, fresh->EmbeddingRow(0, key));
    }
  }
  EXPECT_EQ(restored_rows, 20);
  // Idle times or a sketch inconsistent with their rows are refused, changing nothing.
  std::unique_ptr<ShardCore> target = *ShardCore::Create(limited(0, 2), &clock_, nullptr);
  v1::ShardCheckpoint bad = sources[0];
  bad.mutable_embeddings(0)->mutable_last_touched()->resize(3);
  EXPECT_EQ(target->Restore({bad, sources[1]}).code(), absl::StatusCode::kDataLoss);
  bad = sources[0];
  bad.mutable_embeddings(0)->mutable_admission()->mutable_counters()->resize(10);
  EXPECT_EQ(target->Restore({bad, sources[1]}).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(target->Stats().embedding_rows, 0);
  EXPECT_TRUE(target->Restore(sources).ok());
  EXPECT_EQ(target->Stats().embedding_rows, 10);
}

// --- Evaluation points (EvalSpec) --------------------------------------------------------

// An evaluation point's read of `keys` of table 0 (release: the evaluation's last read).
v1::PullResponse ReadPoint(ShardCore& core, int64_t point, const std::vector<uint64_t>& keys,
                           bool release = false, bool keep = false) {
  v1::PullRequest request;
  request.set_request_id(11);
  request.set_eval_point(point);
  request.set_release_point(release);
  request.set_keep_point(keep);
  if (!keys.empty()) *request.add_sparse() = Rows(0, keys);
  std::optional<v1::PullResponse> response;
  int evaluator = 0;
  EXPECT_TRUE(core.Pull({&evaluator, -1, /*trains=*/false}, request,
                        [&](PullReply r) { response = std::move(r).ToMessage(); })
                  .ok());
  EXPECT_TRUE(response.has_value()) << "a point's read is answered at once";
  return response.value_or(v1::PullResponse{});
}

TEST_F(ShardEmbeddingTest, AnEvaluationPointKeepsTheParametersAndRowsAsTheyWereUntilReleased) {
  v1::ShardAssignment assignment = Assignment(0, 2, v1::MODE_ASYNC);
  assignment.mutable_job()->mutable_eval()->set_every_global_batches(2);
  absl::StatusOr<std::unique_ptr<ShardCore>> made = ShardCore::Create(assignment, &clock_, nullptr);
  ASSERT_TRUE(made.ok()) << made.status();
  ShardCore& core = **made;
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 3);
  // Nothing to read yet (and the read tells the shard an evaluator wants points).
  v1::PullResponse none = ReadPoint(core, 1, keys);
  EXPECT_EQ(none.eval_point(), 0);
  EXPECT_TRUE(none.values().empty());
  EXPECT_EQ(none.sparse_size(), 0);
  // Two global batches (async: each push of 4 samples is one): point 1.
  auto update = [&](float g) {
    v1::PushRequest push =
        Push(core.Stats().version, 4, {Rows(0, {keys[0], keys[1]}, {g, g, g, g})});
    push.set_gradient(tensor::PackFloats(std::vector<float>{g}));
    ASSERT_EQ(core.Push(1, push).outcome(), v1::PUSH_APPLIED);
  };
  update(1);
  update(2);
  const std::vector<float> dense_then = core.Parameters();
  const std::vector<float> rows_then = *PullRows(core, keys, /*create=*/false);
  clock_.Advance(absl::Seconds(3));
  update(4);  // keys 0 and 1 and the dense element move on; key 2 never changes
  ASSERT_NE(*PullRows(core, keys, /*create=*/false), rows_then);

  v1::PullResponse first = ReadPoint(core, 1, keys);
  EXPECT_EQ(first.eval_point(), 1);
  EXPECT_EQ(first.version(), 2);
  EXPECT_EQ(first.point_examples(), 8);
  EXPECT_DOUBLE_EQ(first.point_age_seconds(), 3.0);
  EXPECT_EQ(Unpack(first.values()), dense_then);
  ASSERT_EQ(first.sparse_size(), 1);
  EXPECT_EQ(Unpack(first.sparse(0).values()), rows_then);

  // Point 2 is made; point 1, being read, stays until released.
  update(8);
  EXPECT_EQ(ReadPoint(core, 1, keys).eval_point(), 1);
  EXPECT_EQ(ReadPoint(core, 1, {}, /*release=*/true).eval_point(), 1);
  v1::PullResponse second = ReadPoint(core, 1, keys);
  EXPECT_EQ(second.eval_point(), 2) << "the first kept point at or after the one asked for";
  EXPECT_EQ(second.version(), 4);
  EXPECT_EQ(Unpack(second.sparse(0).values()), *PullRows(core, keys, /*create=*/false));
  ReadPoint(core, 2, {}, /*release=*/true);

  // An evaluator that falls behind finds the newest points kept (at most two unread).
  for (int i = 0; i < 6; ++i) update(1);  // points 3, 4 and 5
  EXPECT_EQ(ReadPoint(core, 3, {}).eval_point(), 4);
}

// A point released with keep_point (the best on validation so far) becomes the kept version: a
// parameters-only checkpoint of the point, rows as they were then, taken once.
TEST_F(ShardEmbeddingTest, AReleasedPointMarkedKeepIsTheKeptVersionAsItWasThen) {
  v1::ShardAssignment assignment = Assignment(0, 2, v1::MODE_ASYNC);
  assignment.mutable_job()->mutable_eval()->set_every_global_batches(2);
  absl::StatusOr<std::unique_ptr<ShardCore>> made = ShardCore::Create(assignment, &clock_, nullptr);
  ASSERT_TRUE(made.ok()) << made.status();
  ShardCore& core = **made;
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 2);
  ReadPoint(core, 1, keys);  // an evaluator wants points
  auto update = [&](float g) {
    v1::PushRequest push = Push(core.Stats().version, 4, {Rows(0, keys, {g, g, g, g})});
    push.set_gradient(tensor::PackFloats(std::vector<float>{g}));
    ASSERT_EQ(core.Push(1, push).outcome(), v1::PUSH_APPLIED);
  };
  update(1);
  update(2);  // point 1
  const std::vector<float> dense_then = core.Parameters();
  const std::vector<float> rows_then = *PullRows(core, keys, /*create=*/false);
  update(4);
  ReadPoint(core, 1, keys, /*release=*/true, /*keep=*/false);
  EXPECT_TRUE(core.TakeKeptPoint() == nullptr) << "released without keep";

  update(3);  // point 2
  const std::vector<float> dense_2 = core.Parameters();
  const std::vector<float> rows_2 = *PullRows(core, keys, /*create=*/false);
  update(5);
  ASSERT_NE(core.Parameters(), dense_2);
  ReadPoint(core, 2, keys, /*release=*/true, /*keep=*/true);
  std::shared_ptr<const v1::ShardCheckpoint> kept = core.TakeKeptPoint();
  ASSERT_TRUE(kept != nullptr);
  EXPECT_TRUE(core.TakeKeptPoint() == nullptr) << "taken once";
  EXPECT_EQ(kept->version(), 4);
  EXPECT_EQ(kept->optimizer(), ShardCore::kKeptOptimizer);
  ASSERT_EQ(kept->slices_size(), 1);
  EXPECT_EQ(Unpack(kept->slices(0).values()), dense_2);
  EXPECT_EQ(kept->slices(0).optimizer_state_size(), 0) << "parameters only";
  ASSERT_EQ(kept->embeddings_size(), 1);
  std::vector<uint64_t> kept_keys;
  ASSERT_TRUE(tensor::UnpackKeys(kept->embeddings(0).keys(), kept_keys).ok());
  const std::vector<float> kept_values = Unpack(kept->embeddings(0).values());
  ASSERT_EQ(kept_keys.size(), keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    const size_t at = static_cast<size_t>(std::find(kept_keys.begin(), kept_keys.end(), keys[k]) -
                                          kept_keys.begin());
    ASSERT_LT(at, kept_keys.size());
    EXPECT_EQ(
        std::vector<float>(kept_values.begin() + at * kDim, kept_values.begin() + (at + 1) * kDim),
        std::vector<float>(rows_2.begin() + k * kDim, rows_2.begin() + (k + 1) * kDim))
        << "key " << keys[k] << " as it was at the point";
  }
  EXPECT_NE(rows_2, rows_then);
  EXPECT_NE(dense_2, dense_then);
}

TEST_F(ShardEmbeddingTest, WithoutAnEvaluatorNoEvaluationPointIsKept) {
  v1::ShardAssignment assignment = Assignment(0, 2, v1::MODE_ASYNC);
  assignment.mutable_job()->mutable_eval()->set_every_global_batches(1);
  absl::StatusOr<std::unique_ptr<ShardCore>> made = ShardCore::Create(assignment, &clock_, nullptr);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::vector<uint64_t> keys = OwnedKeys(0, 2, 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ((*made)->Push(1, Push(i, 4, {Rows(0, keys, {1, 1})})).outcome(), v1::PUSH_APPLIED);
  }
  // The first read arms the points: the ones already passed were never made.
  EXPECT_EQ(ReadPoint(**made, 1, keys).eval_point(), 0);
  ASSERT_EQ((*made)->Push(1, Push(3, 4, {Rows(0, keys, {1, 1})})).outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(ReadPoint(**made, 1, keys).eval_point(), 4);
}

}  // namespace
}  // namespace syncopate::shard
