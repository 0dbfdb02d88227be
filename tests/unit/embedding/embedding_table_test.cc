#include "libs/embedding/embedding_table.h"

#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "libs/optim/update_rule.h"
#include "libs/tensor/initializer.h"

namespace syncopate::embedding {
namespace {

using ::syncopate::v1::EmbeddingTableSpec;
using ::syncopate::v1::Initializer;
using ::syncopate::v1::OptimizerSpec;

constexpr uint64_t kSeed = 11;

EmbeddingTableSpec TableSpec(int32_t dim, Initializer::Kind kind = Initializer::UNIFORM,
                             double scale = 0.05) {
  EmbeddingTableSpec spec;
  spec.set_name("C3");
  spec.set_dim(dim);
  spec.mutable_init()->set_kind(kind);
  spec.mutable_init()->set_scale(scale);
  return spec;
}

std::unique_ptr<optim::UpdateRule> Rule(OptimizerSpec::Kind kind, float lr = 0.1f) {
  OptimizerSpec spec;
  spec.set_kind(kind);
  spec.set_learning_rate(lr);
  absl::StatusOr<std::unique_ptr<optim::UpdateRule>> rule = optim::CreateUpdateRule(spec);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return std::move(*rule);
}

std::unique_ptr<EmbeddingTable> Table(const EmbeddingTableSpec& spec,
                                      const optim::UpdateRule* rule) {
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> table = EmbeddingTable::Create(spec, kSeed, rule);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(*table);
}

std::vector<float> InitialRow(const EmbeddingTableSpec& spec, uint64_t key) {
  std::vector<float> row(spec.dim());
  EXPECT_TRUE(tensor::InitializeRow(spec.init(), kSeed, spec.name(), key, row).ok());
  return row;
}

// Every row as ForEach gives it: key -> (value, slots).
using Rows = std::map<uint64_t, std::pair<std::vector<float>, std::vector<float>>>;
Rows Dump(const EmbeddingTable& table) {
  Rows rows;
  table.ForEach(
      [&](uint64_t key, std::span<const float> value, std::span<const float> slots, int64_t) {
        rows[key] = {std::vector<float>(value.begin(), value.end()),
                     std::vector<float>(slots.begin(), slots.end())};
      });
  return rows;
}

TEST(EmbeddingTable, CreateRejectsUnusableSpecs) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::SGD);
  const auto code = [&](const EmbeddingTableSpec& spec, const optim::UpdateRule* r) {
    return EmbeddingTable::Create(spec, kSeed, r).status().code();
  };
  EXPECT_EQ(code(TableSpec(0), rule.get()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(TableSpec(-4), rule.get()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(TableSpec(4, Initializer::HE_UNIFORM), rule.get()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(TableSpec(4, Initializer::KIND_UNSPECIFIED), rule.get()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(TableSpec(4, Initializer::UNIFORM, 0), rule.get()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(TableSpec(4), nullptr), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(EmbeddingTable::Create(TableSpec(4, Initializer::ZEROS, 0), kSeed, rule.get()).ok());
}

TEST(EmbeddingTable, PullCreatesTheRowWithItsInitialValueOnFirstTouch) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAGRAD);
  const EmbeddingTableSpec spec = TableSpec(8);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->dim(), 8);
  EXPECT_EQ(table->spec().name(), "C3");

  std::vector<float> row(8);
  table->Pull(77, row);
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(row, InitialRow(spec, 77));
  for (float v : row) EXPECT_LE(std::abs(v), 0.05f);
  const Rows rows = Dump(*table);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows.at(77).second, std::vector<float>(8, 0.1f)) << "Adagrad's initial accumulator";

  std::vector<float> again(8);
  table->Pull(77, again);
  EXPECT_EQ(again, row);
  EXPECT_EQ(table->size(), 1);
}

TEST(EmbeddingTable, RowsReadTheSameOnAnyTableInstance) {
  // Shards create rows independently; a row's initial value must not depend on which one does.
  std::unique_ptr<optim::UpdateRule> adam = Rule(OptimizerSpec::ADAM);
  std::unique_ptr<optim::UpdateRule> sgd = Rule(OptimizerSpec::SGD);
  std::unique_ptr<EmbeddingTable> a = Table(TableSpec(16), adam.get());
  std::unique_ptr<EmbeddingTable> b = Table(TableSpec(16), sgd.get());
  std::vector<float> from_a(16);
  std::vector<float> from_b(16);
  std::vector<float> scratch(16);
  b->Pull(1, scratch);  // a different creation order
  for (uint64_t key : {uint64_t{5}, uint64_t{1} << 40, ~uint64_t{0}}) {
    a->Pull(key, from_a);
    b->Pull(key, from_b);
    EXPECT_EQ(from_a, from_b) << key;
  }
}

TEST(EmbeddingTable, PeekReadsTheInitialValueWithoutCreating) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::SGD);
  const EmbeddingTableSpec spec = TableSpec(4);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  std::vector<float> peeked(4);
  table->Peek(9, peeked);
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(peeked, InitialRow(spec, 9));

  table->Apply(9, std::vector<float>{1, 1, 1, 1}, 1);
  table->Peek(9, peeked);
  std::vector<float> expected = InitialRow(spec, 9);
  for (float& v : expected) v -= 0.1f;
  EXPECT_EQ(peeked, expected) << "a stored row reads as stored";
  EXPECT_EQ(table->size(), 1);
}

TEST(EmbeddingTable, ZerosInitializer) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::SGD);
  std::unique_ptr<EmbeddingTable> table = Table(TableSpec(3, Initializer::ZEROS, 0), rule.get());
  std::vector<float> row(3, 7.0f);
  table->Pull(123, row);
  EXPECT_EQ(row, std::vector<float>(3, 0.0f));
}

TEST(EmbeddingTable, AdagradUpdatesOnlyTheTouchedRowAndItsAccumulator) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAGRAD);
  const EmbeddingTableSpec spec = TableSpec(2);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  std::vector<float> row(2);
  table->Pull(1, row);
  table->Pull(2, row);
  const Rows before = Dump(*table);

  table->Apply(1, std::vector<float>{1.0f, -2.0f}, 1);
  const Rows after = Dump(*table);
  EXPECT_EQ(after.at(2), before.at(2)) << "untouched row and slot";
  // acc = 0.1 + g^2; p -= 0.1 * g / (sqrt(acc) + 1e-7).
  const std::vector<float> init = InitialRow(spec, 1);
  EXPECT_NEAR(after.at(1).second[0], 1.1f, 1e-6);
  EXPECT_NEAR(after.at(1).second[1], 4.1f, 1e-6);
  EXPECT_NEAR(after.at(1).first[0], init[0] - 0.1 / std::sqrt(1.1), 1e-6);
  EXPECT_NEAR(after.at(1).first[1], init[1] + 0.2 / std::sqrt(4.1), 1e-6);
}

TEST(EmbeddingTable, ApplyCreatesAnAbsentRowFirst) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::SGD, 1.0f);
  const EmbeddingTableSpec spec = TableSpec(2);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  table->Apply(5, std::vector<float>{1.0f, 1.0f}, 1);
  std::vector<float> row(2);
  table->Pull(5, row);
  const std::vector<float> init = InitialRow(spec, 5);
  EXPECT_FLOAT_EQ(row[0], init[0] - 1.0f);
  EXPECT_FLOAT_EQ(row[1], init[1] - 1.0f);
}

TEST(EmbeddingTable, LazyAdamLeavesUntouchedRowsMomentsAlone) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM, 0.01f);
  const EmbeddingTableSpec spec = TableSpec(3);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  const std::vector<float> grad = {0.5f, -1.0f, 2.0f};
  table->Apply(10, grad, 1);
  table->Apply(20, grad, 2);
  const Rows after_two = Dump(*table);
  table->Apply(10, grad, 3);
  table->Apply(30, grad, 4);
  const Rows after_four = Dump(*table);
  EXPECT_EQ(after_four.at(20), after_two.at(20)) << "row 20's value and moments are frozen";

  // Row 10 moved exactly as a dense block updated at steps 1 and 3 (the shard's global count).
  std::vector<float> expected = InitialRow(spec, 10);
  std::vector<float> m(3, 0.0f);
  std::vector<float> v(3, 0.0f);
  std::vector<std::span<float>> slots = {m, v};
  rule->Apply(expected, grad, slots, 1);
  rule->Apply(expected, grad, slots, 3);
  EXPECT_EQ(after_four.at(10).first, expected);
  std::vector<float> moments = m;
  moments.insert(moments.end(), v.begin(), v.end());
  EXPECT_EQ(after_four.at(10).second, moments) << "slots are [m | v]";
}

TEST(EmbeddingTable, ForEachAndSetRoundTrip) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM);
  std::unique_ptr<EmbeddingTable> source = Table(TableSpec(4), rule.get());
  std::vector<float> row(4);
  for (uint64_t key = 0; key < 300; ++key) {  // several chunks
    source->Pull(key * 7919, row);
    if (key % 3 == 0) source->Apply(key * 7919, std::vector<float>{1, -1, 0.5f, 2}, 1 + key / 3);
  }
  const Rows saved = Dump(*source);
  ASSERT_EQ(saved.size(), 300u);

  std::unique_ptr<EmbeddingTable> restored = Table(TableSpec(4), rule.get());
  restored->Pull(7919, row);  // Set overwrites an existing row too
  restored->Apply(7919, std::vector<float>{3, 3, 3, 3}, 1);
  source->ForEach(
      [&](uint64_t key, std::span<const float> value, std::span<const float> slots, int64_t) {
        EXPECT_EQ(value.size(), 4u);
        EXPECT_EQ(slots.size(), 8u);
        restored->Set(key, value, slots);
      });
  EXPECT_EQ(restored->size(), 300);
  EXPECT_EQ(Dump(*restored), saved);
  EXPECT_EQ(restored->raw_bytes(), source->raw_bytes());
}

TEST(EmbeddingTable, BatchedCallsEqualKeyByKeyCalls) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM, 0.01f);
  constexpr int kDim = 5;
  std::unique_ptr<EmbeddingTable> single = Table(TableSpec(kDim), rule.get());
  std::unique_ptr<EmbeddingTable> batched = Table(TableSpec(kDim), rule.get());
  // 101 keys: three full blocks and a partial one, with repeats inside and across blocks.
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 101; ++i) keys.push_back((i * i) % 61);
  std::vector<float> grads(keys.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = std::sin(static_cast<float>(i));

  std::vector<float> pulled_single(keys.size() * kDim);
  for (size_t i = 0; i < keys.size(); ++i) {
    single->Pull(keys[i], std::span<float>(pulled_single).subspan(i * kDim, kDim));
  }
  std::vector<float> pulled_batched(keys.size() * kDim);
  batched->PullBatch(keys, pulled_batched);
  EXPECT_EQ(pulled_batched, pulled_single);

  for (int64_t step = 1; step <= 2; ++step) {
    for (size_t i = 0; i < keys.size(); ++i) {
      single->Apply(keys[i], std::span<const float>(grads).subspan(i * kDim, kDim), step);
    }
    batched->ApplyBatch(keys, grads, step);
  }
  EXPECT_EQ(Dump(*batched), Dump(*single));
  // Rows first touched by ApplyBatch are created as Apply creates them.
  const std::vector<uint64_t> fresh = {1000, 1001, 1000};
  const std::vector<float> fresh_grads(fresh.size() * kDim, 0.5f);
  batched->ApplyBatch(fresh, fresh_grads, 3);
  for (size_t i = 0; i < fresh.size(); ++i) {
    single->Apply(fresh[i], std::span<const float>(fresh_grads).subspan(i * kDim, kDim), 3);
  }
  EXPECT_EQ(Dump(*batched), Dump(*single));
}

TEST(EmbeddingTable, RowsKeepTheirValuesAcrossManyChunks) {
  // 36-byte rows (dim 3, Adam) never divide a chunk evenly, and 100k of them (3.6 MB) reach the
  // huge-page-sized chunks: no row may overlap another.
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM);
  const EmbeddingTableSpec spec = TableSpec(3);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  std::vector<float> row(3);
  constexpr uint64_t kRows = 100000;
  for (uint64_t key = 0; key < kRows; ++key) table->Pull(key, row);
  int64_t wrong = 0;
  table->ForEach(
      [&](uint64_t key, std::span<const float> value, std::span<const float> slots, int64_t) {
        wrong += std::vector<float>(value.begin(), value.end()) != InitialRow(spec, key);
        wrong += std::vector<float>(slots.begin(), slots.end()) != std::vector<float>(6, 0.0f);
      });
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(table->size(), static_cast<int64_t>(kRows));
}

TEST(EmbeddingTable, RowsLargerThanAHugePage) {
  // 2.4 MB rows: each chunk must still hold at least one whole row.
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::SGD, 1.0f);
  const EmbeddingTableSpec spec = TableSpec(600000);
  std::unique_ptr<EmbeddingTable> table = Table(spec, rule.get());
  std::vector<float> row(spec.dim());
  for (uint64_t key = 0; key < 3; ++key) table->Pull(key, row);
  table->Apply(1, std::vector<float>(spec.dim(), 1.0f), 1);
  table->Pull(0, row);
  EXPECT_EQ(row, InitialRow(spec, 0));
  table->Pull(2, row);
  EXPECT_EQ(row, InitialRow(spec, 2));
  EXPECT_GE(table->memory_bytes(), table->raw_bytes());
}

TEST(EmbeddingTable, RawBytesCountValueAndSlots) {
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM);
  std::unique_ptr<EmbeddingTable> table = Table(TableSpec(16), rule.get());
  EXPECT_EQ(table->raw_bytes(), 0);
  std::vector<float> row(16);
  for (uint64_t key = 0; key < 10; ++key) table->Pull(key, row);
  EXPECT_EQ(table->raw_bytes(), 10 * 16 * 3 * 4);
  EXPECT_GE(table->memory_bytes(), table->raw_bytes());
}

TEST(EmbeddingTable, SmallTablesStaySmall) {
  // A WDL job holds 26 tables on every shard, some with a handful of rows.
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAM);
  std::unique_ptr<EmbeddingTable> table = Table(TableSpec(16), rule.get());
  EXPECT_LT(table->memory_bytes(), 1024);
  std::vector<float> row(16);
  for (uint64_t key = 0; key < 3; ++key) table->Pull(key, row);
  EXPECT_LT(table->memory_bytes(), 16 * 1024);
}

TEST(EmbeddingTable, MillionRowsCostAtMostOneAndAHalfTimesTheirRawBytes) {
  // The recommendation workload's memory goal: <= 1.5x the raw value + optimizer-state bytes.
  std::unique_ptr<optim::UpdateRule> rule = Rule(OptimizerSpec::ADAGRAD);
  std::unique_ptr<EmbeddingTable> table = Table(TableSpec(16), rule.get());
  std::vector<float> row(16);
  constexpr int64_t kRows = 1000000;
  for (int64_t i = 0; i < kRows; ++i) {
    table->Pull(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull, row);
  }
  ASSERT_EQ(table->size(), kRows);
  EXPECT_EQ(table->raw_bytes(), kRows * 16 * 2 * 4);
  EXPECT_LE(table->memory_bytes(), table->raw_bytes() * 3 / 2)
      << "memory " << table->memory_bytes() << " raw " << table->raw_bytes();
  std::cout << "1M rows x 16 dims, Adagrad: memory_bytes " << table->memory_bytes()
            << ", raw_bytes " << table->raw_bytes() << ", ratio "
            << static_cast<double>(table->memory_bytes()) / table->raw_bytes() << "\n";
}

}  // namespace
}  // namespace syncopate::embedding
