// What the simulation tests share: a timing without randomness, bit-for-bit comparisons of runs,
// and the data order a two-worker run sees.
#ifndef SYNCOPATE_TESTS_UNIT_SIM_SIM_TEST_UTIL_H_
#define SYNCOPATE_TESTS_UNIT_SIM_SIM_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "libs/data/lease_table.h"
#include "libs/sim/simulation.h"

namespace syncopate::sim {

// 10 ms per step and 1 ms per message, nothing random: events happen in an order a test can
// reason about.
inline v1::SimSpec Clockwork() {
  v1::SimSpec spec;
  spec.mutable_step_time()->set_seconds_per_step(0.01);
  spec.mutable_network()->set_latency_seconds(0.001);
  return spec;
}

// Clockwork plus 1 ms per example, log-normal noise, Pareto hiccups and worker 3 four times
// slower: every random part of the step-time model in use.
inline v1::SimSpec NoisyWithAStraggler() {
  v1::SimSpec spec = Clockwork();
  v1::StepTimeSpec* step = spec.mutable_step_time();
  step->set_seconds_per_example(0.001);
  step->set_lognormal_sigma(0.3);
  step->set_hiccup_probability(0.05);
  step->set_hiccup_scale_seconds(0.02);
  step->set_hiccup_alpha(1.5);
  v1::WorkerSpeed* slow = spec.add_speeds();
  slow->set_worker(3);
  slow->set_factor(4);
  return spec;
}

// `job` on Clockwork, evaluated at the end only.
inline SimOptions ClockworkRun(const v1::JobSpec& job) {
  SimOptions options;
  options.job = job;
  options.spec = Clockwork();
  options.periodic_eval = false;
  return options;
}

// SimSpec.joins / .deaths entries: worker `worker` (index) joins or dies at `at` seconds.
inline void AddJoin(v1::SimSpec& spec, int worker, double at) {
  v1::WorkerJoin* join = spec.add_joins();
  join->set_worker(worker);
  join->set_at_seconds(at);
}
inline void AddDeath(v1::SimSpec& spec, int worker, double at, double detected_after = 0) {
  v1::WorkerDeath* death = spec.add_deaths();
  death->set_worker(worker);
  death->set_at_seconds(at);
  death->set_detected_after_seconds(detected_after);
}

inline bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two runs that must agree to the last bit: parameters, embedding rows, clock, events, counts,
// every evaluation and every switch.
inline void ExpectSameRun(const SimResult& a, const SimResult& b) {
  EXPECT_TRUE(BitIdentical(a.parameters, b.parameters));
  EXPECT_EQ(a.embedding_rows, b.embedding_rows);
  EXPECT_EQ(a.wall_seconds, b.wall_seconds);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.examples, b.examples);
  EXPECT_EQ(a.shard_versions, b.shard_versions);
  EXPECT_EQ(a.gradients.decayed(), b.gradients.decayed());
  EXPECT_EQ(a.dead_workers, b.dead_workers);
  ASSERT_EQ(a.evaluations.size(), b.evaluations.size());
  for (size_t i = 0; i < a.evaluations.size(); ++i) {
    EXPECT_EQ(a.evaluations[i].seconds, b.evaluations[i].seconds);
    EXPECT_EQ(a.evaluations[i].accuracy, b.evaluations[i].accuracy);
    EXPECT_EQ(a.evaluations[i].loss, b.evaluations[i].loss);
    EXPECT_EQ(a.evaluations[i].auc, b.evaluations[i].auc);
  }
  EXPECT_EQ(a.switches.size(), b.switches.size());
}

// The examples workers 1 and 2 visit, in order, when the coordinator hands out leases
// alternately (1, 2, 1, 2, ...): at least `per_worker` each.
inline std::vector<std::vector<int64_t>> AlternatingLeaseStreams(int64_t examples,
                                                                 int64_t block_size, uint64_t seed,
                                                                 int64_t per_worker) {
  data::LeaseTable leases = *data::LeaseTable::Create(examples, block_size, seed);
  std::vector<std::vector<int64_t>> stream(2);
  while (static_cast<int64_t>(stream[1].size()) < per_worker) {
    for (int w = 0; w < 2; ++w) {
      std::vector<int64_t> order = data::LeaseExampleOrder(leases.Acquire(w + 1));
      stream[w].insert(stream[w].end(), order.begin(), order.end());
    }
  }
  return stream;
}

}  // namespace syncopate::sim

#endif  // SYNCOPATE_TESTS_UNIT_SIM_SIM_TEST_UTIL_H_
