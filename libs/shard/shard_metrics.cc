#include "libs/shard/shard_metrics.h"

#include <cmath>

#include "libs/metrics/buckets.h"

namespace syncopate::shard {
namespace {

std::string OutcomeName(v1::PushOutcome outcome) {
  switch (outcome) {
    case v1::PUSH_APPLIED:
      return "applied";
    case v1::PUSH_DECAYED:
      return "decayed";
    case v1::PUSH_DROPPED:
      return "dropped";
    case v1::PUSH_REJECTED:
      return "rejected";
    default:
      return "unknown";
  }
}

prometheus::Histogram::BucketBoundaries StalenessBuckets() {
  return {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64};
}

}  // namespace

ShardMetrics::ShardMetrics(prometheus::Registry& registry, int shard_id)
    : shard_(std::to_string(shard_id)),
      version_(prometheus::BuildGauge()
                   .Name("syncopate_shard_version")
                   .Help("Parameter version of the shard (updates applied since start)")
                   .Register(registry)
                   .Add({{"shard", shard_}})),
      mode_(prometheus::BuildGauge()
                .Name("syncopate_shard_mode")
                .Help("1 for the shard's current aggregation mode, 0 for the others")
                .Register(registry)),
      updates_(prometheus::BuildCounter()
                   .Name("syncopate_shard_updates_total")
                   .Help("Updates applied (each consumes one global batch)")
                   .Register(registry)
                   .Add({{"shard", shard_}})),
      gradients_(prometheus::BuildCounter()
                     .Name("syncopate_shard_gradients_total")
                     .Help("Pushed gradients by outcome (applied, decayed, dropped, rejected)")
                     .Register(registry)),
      rejections_(prometheus::BuildCounter()
                      .Name("syncopate_shard_rejections_total")
                      .Help("Rejected pushes and requests by reason; never applied")
                      .Register(registry)),
      staleness_(prometheus::BuildHistogram()
                     .Name("syncopate_shard_staleness")
                     .Help("Staleness (versions) of pushed gradients at arrival")
                     .Register(registry)
                     .Add({{"shard", shard_}}, StalenessBuckets())),
      apply_seconds_(prometheus::BuildHistogram()
                         .Name("syncopate_shard_apply_seconds")
                         .Help("Time to apply one update (mean gradient + optimizer step)")
                         .Register(registry)
                         .Add({{"shard", shard_}}, metrics::SecondsBuckets())),
      pull_held_seconds_(prometheus::BuildHistogram()
                             .Name("syncopate_shard_pull_held_seconds")
                             .Help("Time a pull waited for its version (sync barrier wait)")
                             .Register(registry)
                             .Add({{"shard", shard_}}, metrics::SecondsBuckets())),
      parameter_bytes_(prometheus::BuildGauge()
                           .Name("syncopate_shard_parameter_bytes")
                           .Help("Bytes of parameters held by the shard")
                           .Register(registry)
                           .Add({{"shard", shard_}})),
      optimizer_bytes_(prometheus::BuildGauge()
                           .Name("syncopate_shard_optimizer_bytes")
                           .Help("Bytes of optimizer state held by the shard")
                           .Register(registry)
                           .Add({{"shard", shard_}})),
      embedding_rows_(prometheus::BuildGauge()
                          .Name("syncopate_shard_embedding_rows")
                          .Help("Embedding rows stored by the shard, over all tables")
                          .Register(registry)
                          .Add({{"shard", shard_}})),
      table_rows_(prometheus::BuildGauge()
                      .Name("syncopate_shard_embedding_table_rows")
                      .Help("Embedding rows stored by the shard, per table")
                      .Register(registry)),
      table_bytes_(prometheus::BuildGauge()
                       .Name("syncopate_shard_embedding_table_bytes")
                       .Help("Bytes one embedding table holds on the shard: rows, index, free "
                             "list and admission sketch")
                       .Register(registry)),
      admitted_(prometheus::BuildCounter()
                    .Name("syncopate_shard_embedding_admitted_total")
                    .Help("Embedding rows created by training (on admission, or at first sight "
                          "when tables admit every key)")
                    .Register(registry)
                    .Add({{"shard", shard_}})),
      unadmitted_(prometheus::BuildCounter()
                      .Name("syncopate_shard_embedding_unadmitted_total")
                      .Help("Embedding keys not admitted yet: training reads answered with zeros "
                            "(kind=lookup), gradient rows dropped (kind=gradient)")
                      .Register(registry)),
      unadmitted_lookups_(unadmitted_.Add({{"shard", shard_}, {"kind", "lookup"}})),
      unadmitted_gradients_(unadmitted_.Add({{"shard", shard_}, {"kind", "gradient"}})),
      evicted_(prometheus::BuildCounter()
                   .Name("syncopate_shard_embedding_evicted_total")
                   .Help("Embedding rows removed after evict_after_updates idle updates")
                   .Register(registry)
                   .Add({{"shard", shard_}})),
      barrier_waiting_workers_(prometheus::BuildGauge()
                                   .Name("syncopate_shard_barrier_waiting_workers")
                                   .Help("Members the current sync barrier still waits for")
                                   .Register(registry)
                                   .Add({{"shard", shard_}})),
      learning_rate_(prometheus::BuildGauge()
                         .Name("syncopate_shard_learning_rate")
                         .Help("Learning rate the schedule gave the latest update")
                         .Register(registry)
                         .Add({{"shard", shard_}})),
      look_ahead_updates_(prometheus::BuildHistogram()
                              .Name("syncopate_shard_look_ahead_updates")
                              .Help("Updates gba pulls were extrapolated by along the optimizer's "
                                    "velocity (look-ahead; 0-delay pulls are not observed)")
                              .Register(registry)
                              .Add({{"shard", shard_}}, StalenessBuckets())),
      wire_(prometheus::BuildCounter()
                .Name("syncopate_shard_wire_bytes_total")
                .Help("Bytes this shard's Train streams moved, by direction and part (dense "
                      "payload, embedding keys and rows, message header)")
                .Register(registry),
            {{"shard", shard_}}) {
  for (const char* outcome : {"applied", "decayed", "dropped", "rejected"}) {
    gradients_.Add({{"shard", shard_}, {"outcome", outcome}});
  }
  // Every rejection reason exists from the start at 0, so rate() and increase() see the first
  // rejection and dashboards have a series before anything goes wrong.
  for (RejectionReason reason : kAllRejectionReasons) {
    rejections_.Add({{"shard", shard_}, {"reason", std::string(RejectionReasonName(reason))}});
  }
}

ShardMetrics* ShardMetrics::NoOp() {
  static auto* const kRegistry = new prometheus::Registry();
  static auto* const kNoOp = new ShardMetrics(*kRegistry, 0);
  return kNoOp;
}

void ShardMetrics::SetVersion(int64_t version) { version_.Set(static_cast<double>(version)); }

void ShardMetrics::SetMode(v1::Mode mode) {
  for (const ModeRules& row : kModeRules) {
    if (!row.shard_runs) continue;
    mode_.Add({{"shard", shard_}, {"mode", std::string(row.name)}}).Set(row.mode == mode ? 1 : 0);
  }
}

void ShardMetrics::CountUpdate(double apply_seconds) {
  updates_.Increment();
  apply_seconds_.Observe(apply_seconds);
}

void ShardMetrics::CountOutcome(v1::PushOutcome outcome, int64_t staleness) {
  gradients_.Add({{"shard", shard_}, {"outcome", OutcomeName(outcome)}}).Increment();
  if (outcome != v1::PUSH_REJECTED) staleness_.Observe(static_cast<double>(staleness));
}

void ShardMetrics::CountRejection(RejectionReason reason) {
  rejections_.Add({{"shard", shard_}, {"reason", std::string(RejectionReasonName(reason))}})
      .Increment();
}

void ShardMetrics::ObservePullHeld(double seconds) { pull_held_seconds_.Observe(seconds); }

void ShardMetrics::SetLearningRate(double learning_rate) { learning_rate_.Set(learning_rate); }

void ShardMetrics::ObserveLookAhead(double updates) { look_ahead_updates_.Observe(updates); }

void ShardMetrics::SetBytes(int64_t parameter_bytes, int64_t optimizer_bytes) {
  parameter_bytes_.Set(static_cast<double>(parameter_bytes));
  optimizer_bytes_.Set(static_cast<double>(optimizer_bytes));
}

void ShardMetrics::SetEmbeddingRows(int64_t rows) {
  embedding_rows_.Set(static_cast<double>(rows));
}

void ShardMetrics::SetTableRows(const std::string& table, int64_t rows, int64_t bytes) {
  table_rows_.Add({{"shard", shard_}, {"table", table}}).Set(static_cast<double>(rows));
  table_bytes_.Add({{"shard", shard_}, {"table", table}}).Set(static_cast<double>(bytes));
}

void ShardMetrics::CountRowEvents(const embedding::RowEvents& events) {
  admitted_.Increment(static_cast<double>(events.admitted));
  unadmitted_lookups_.Increment(static_cast<double>(events.unadmitted_lookups));
  unadmitted_gradients_.Increment(static_cast<double>(events.unadmitted_gradients));
  evicted_.Increment(static_cast<double>(events.evicted));
}

void ShardMetrics::SetBarrierWaitingWorkers(int64_t workers) {
  barrier_waiting_workers_.Set(static_cast<double>(workers));
}

std::vector<v1::StalenessBucket> ShardMetrics::StalenessHistogram() const {
  std::vector<v1::StalenessBucket> buckets;
  const prometheus::ClientMetric metric = staleness_.Collect();
  // Staleness is a whole number of versions, so bucket (a, b] holds a+1..b.
  int64_t min_staleness = 0;
  uint64_t below = 0;
  for (const prometheus::ClientMetric::Bucket& b : metric.histogram.bucket) {
    v1::StalenessBucket& out = buckets.emplace_back();
    out.set_min_staleness(min_staleness);
    const bool bounded = std::isfinite(b.upper_bound);
    out.set_max_staleness(bounded ? static_cast<int64_t>(b.upper_bound) : -1);
    out.set_count(static_cast<int64_t>(b.cumulative_count - below));
    below = b.cumulative_count;
    if (bounded) min_staleness = static_cast<int64_t>(b.upper_bound) + 1;
  }
  return buckets;
}

void ShardMetrics::SetWireBytes(const v1::WireBytes& totals) { wire_.Update(totals); }

}  // namespace syncopate::shard
