// Microbenchmarks of one embedding table's share on a parameter shard (issue 4): the sparse pull,
// push and create-on-touch rates of an EmbeddingTable, and its memory per row against the raw
// value + optimizer-state bytes.
//
//   syncopate-embedding-bench [--benchmark_min_time=0.5] [--benchmark_filter=...]
//   (./dev microbench)
//
// One table of 10,000,000 rows x 16 dims with Adagrad (1 slot: 128 raw bytes a row, 1.28 GB in
// all), populated once per process before any benchmark runs. Keys are SplitMix64(i), i < 10M,
// as hashed categorical features look. Batches are 4096 keys, the order of one worker's unique
// keys of one table per step. Pulls draw row numbers uniformly (every lookup a likely cache miss:
// the worst case) or log-uniformly (P(i) ~ 1/(i+1), Zipf s=1 as feature frequencies roughly
// are, so hot rows stay in cache). Each rate is measured key by key (Pull, Apply) and batched
// (PullBatch, ApplyBatch, which prefetch a block of rows before touching them). Rates are per
// CPU second (Google Benchmark's default), steadier than wall time on a shared machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "libs/common/splitmix64.h"
#include "libs/embedding/embedding_table.h"
#include "libs/optim/update_rule.h"

namespace syncopate::bench {
namespace {

constexpr int64_t kRows = 10'000'000;
constexpr int32_t kDim = 16;
constexpr int64_t kBatch = 4096;
constexpr int kBatches = 256;  // pre-drawn key batches, cycled (8 MiB of keys)

uint64_t KeyOf(int64_t i) { return SplitMix64(static_cast<uint64_t>(i)); }

struct Shared {
  std::unique_ptr<optim::UpdateRule> rule;
  std::unique_ptr<embedding::EmbeddingTable> table;
  double build_seconds = 0;
  int64_t step = 0;              // the shard's global update count, for Apply
  int64_t next_new_row = kRows;  // CreateOnTouch's next never-seen key
};

Shared& State() {
  static Shared* shared = new Shared();
  return *shared;
}

void BuildTable() {
  Shared& shared = State();
  v1::OptimizerSpec optimizer;
  optimizer.set_kind(v1::OptimizerSpec::ADAGRAD);
  optimizer.set_learning_rate(0.05f);
  shared.rule = std::move(optim::CreateUpdateRule(optimizer)).value();
  v1::EmbeddingTableSpec spec;
  spec.set_name("bench");
  spec.set_dim(kDim);
  spec.mutable_init()->set_kind(v1::Initializer::UNIFORM);
  spec.mutable_init()->set_scale(0.01);
  shared.table = std::move(embedding::EmbeddingTable::Create(spec, 1, shared.rule.get())).value();
  std::fprintf(stderr, "embedding_bench: populating %lld rows x %d dims...\n",
               static_cast<long long>(kRows), kDim);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> row(kDim);
  for (int64_t i = 0; i < kRows; ++i) shared.table->Pull(KeyOf(i), row);
  shared.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "embedding_bench: populated in %.1f s (%.2f M rows/s, rehashes included)\n",
               shared.build_seconds, kRows / shared.build_seconds / 1e6);
}

// kBatches batches of kBatch existing keys: uniform over the rows, or log-uniform (Zipf s=1).
const std::vector<uint64_t>& Keys(bool zipf) {
  static const std::vector<uint64_t>* const batches[2] = {
      [] {
        auto* keys = new std::vector<uint64_t>(kBatches * kBatch);
        std::mt19937_64 random(1);
        std::uniform_int_distribution<int64_t> row(0, kRows - 1);
        for (uint64_t& key : *keys) key = KeyOf(row(random));
        return keys;
      }(),
      [] {
        auto* keys = new std::vector<uint64_t>(kBatches * kBatch);
        std::mt19937_64 random(2);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        const double log_rows = std::log(static_cast<double>(kRows));
        for (uint64_t& key : *keys) {
          // floor(N^u) - 1 for u ~ U[0,1): P(i) ~ 1/(i+1) over [0, N).
          const auto i = static_cast<int64_t>(std::exp(unit(random) * log_rows)) - 1;
          key = KeyOf(std::min<int64_t>(std::max<int64_t>(i, 0), kRows - 1));
        }
        return keys;
      }()};
  return *batches[zipf ? 1 : 0];
}

// Arg 0: key distribution (0 uniform, 1 zipf); arg 1: 0 = Pull key by key, 1 = PullBatch.
void BM_SparsePull(benchmark::State& state) {
  embedding::EmbeddingTable& table = *State().table;
  const std::vector<uint64_t>& keys = Keys(state.range(0) == 1);
  const bool batched = state.range(1) == 1;
  std::vector<float> out(kBatch * kDim);
  int batch = 0;
  for (auto _ : state) {
    const uint64_t* begin = keys.data() + batch * kBatch;
    if (batched) {
      table.PullBatch(std::span<const uint64_t>(begin, kBatch), out);
    } else {
      for (int64_t i = 0; i < kBatch; ++i) {
        table.Pull(begin[i], std::span<float>(out.data() + i * kDim, kDim));
      }
    }
    benchmark::DoNotOptimize(out.data());
    batch = (batch + 1) % kBatches;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * kBatch * kDim * sizeof(float));
  state.SetLabel(absl::StrCat(state.range(0) == 1 ? "zipf keys" : "uniform keys",
                              batched ? ", PullBatch" : ", Pull"));
}
BENCHMARK(BM_SparsePull)
    ->ArgNames({"zipf", "batch"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// Arg: 0 = Apply key by key, 1 = ApplyBatch.
void BM_SparsePush(benchmark::State& state) {
  Shared& shared = State();
  const bool batched = state.range(0) == 1;
  const std::vector<uint64_t>& keys = Keys(false);
  std::vector<float> grads(kBatch * kDim);
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (float& g : grads) g = normal(random);
  int batch = 0;
  for (auto _ : state) {
    const uint64_t* begin = keys.data() + batch * kBatch;
    ++shared.step;
    if (batched) {
      shared.table->ApplyBatch(std::span<const uint64_t>(begin, kBatch), grads, shared.step);
    } else {
      for (int64_t i = 0; i < kBatch; ++i) {
        shared.table->Apply(begin[i], std::span<const float>(grads.data() + i * kDim, kDim),
                            shared.step);
      }
    }
    batch = (batch + 1) % kBatches;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * kBatch * kDim * sizeof(float));
  state.SetLabel(batched ? "uniform keys, adagrad, ApplyBatch" : "uniform keys, adagrad, Apply");
}
BENCHMARK(BM_SparsePush)->ArgName("batch")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Not timed: the table's footprint at exactly kRows rows, as counters.
void BM_MemoryPerRow(benchmark::State& state) {
  const Shared& shared = State();
  const embedding::EmbeddingTable& table = *shared.table;
  for (auto _ : state) benchmark::DoNotOptimize(table.memory_bytes());
  const double rows = static_cast<double>(table.size());
  state.counters["rows"] = rows;
  state.counters["bytes_per_row"] = static_cast<double>(table.memory_bytes()) / rows;
  state.counters["raw_bytes_per_row"] = static_cast<double>(table.raw_bytes()) / rows;
  state.counters["ratio"] =
      static_cast<double>(table.memory_bytes()) / static_cast<double>(table.raw_bytes());
  state.counters["build_rows_per_s"] = rows / shared.build_seconds;
}
BENCHMARK(BM_MemoryPerRow)->Iterations(1);

// Last: it grows the table (each batch creates 4096 rows, keys never seen before). Below the
// index's next resize (at 7/8 of 2^24 slots, 14.7M rows) no rehash is included; BM_MemoryPerRow's
// build_rows_per_s is the rate with rehashes.
// Arg: 0 = Pull key by key, 1 = PullBatch.
void BM_CreateOnTouch(benchmark::State& state) {
  Shared& shared = State();
  const bool batched = state.range(0) == 1;
  std::vector<float> out(kBatch * kDim);
  std::vector<uint64_t> keys(kBatch);
  for (auto _ : state) {
    for (uint64_t& key : keys) key = KeyOf(shared.next_new_row++);
    if (batched) {
      shared.table->PullBatch(keys, out);
    } else {
      for (int64_t i = 0; i < kBatch; ++i) {
        shared.table->Pull(keys[i], std::span<float>(out.data() + i * kDim, kDim));
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * kBatch * kDim * sizeof(float));
  state.counters["rows_after"] = static_cast<double>(shared.table->size());
  state.SetLabel(batched ? "PullBatch" : "Pull");
}
BENCHMARK(BM_CreateOnTouch)->ArgName("batch")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  syncopate::bench::BuildTable();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
