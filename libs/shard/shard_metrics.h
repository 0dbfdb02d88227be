// The shard's Prometheus metrics (names in docs/metrics.md).
// Thread-safety: thread-safe (prometheus-cpp metrics are).
#ifndef SYNCOPATE_LIBS_SHARD_SHARD_METRICS_H_
#define SYNCOPATE_LIBS_SHARD_SHARD_METRICS_H_

#include <string>
#include <vector>

#include "libs/common/mode_rules.h"
#include "libs/embedding/embedding_table.h"
#include "libs/metrics/wire_bytes_metrics.h"
#include "libs/shard/rejection_reason.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::shard {

class ShardMetrics {
 public:
  ShardMetrics(prometheus::Registry& registry, int shard_id);

  // The default when nobody exports metrics (tests, tools): counts into a registry no exposer
  // serves. Never destroyed; thread-safe like any other instance.
  static ShardMetrics* NoOp();

  void SetVersion(int64_t version);
  void SetMode(v1::Mode mode);
  void CountUpdate(double apply_seconds);
  void CountOutcome(v1::PushOutcome outcome, int64_t staleness);
  void CountRejection(RejectionReason reason);
  void ObservePullHeld(double seconds);
  void SetBytes(int64_t parameter_bytes, int64_t optimizer_bytes);
  // Embedding rows the shard stores, over all tables (0 for models without tables).
  void SetEmbeddingRows(int64_t rows);
  // One table's rows and bytes (EmbeddingTable::memory_bytes).
  void SetTableRows(const std::string& table, int64_t rows, int64_t bytes);
  // Admission and eviction (ADR 0010), over all tables.
  void CountRowEvents(const embedding::RowEvents& events);
  // Members the current sync barrier still waits for (0 outside sync).
  void SetBarrierWaitingWorkers(int64_t workers);
  // The rate the schedule gave the latest update.
  void SetLearningRate(double learning_rate);
  // Updates a gba pull's parameters were extrapolated by (PullResponse.look_ahead_updates).
  void ObserveLookAhead(double updates);
  // What the shard's Train streams moved so far (TrainService::wire's running totals).
  void SetWireBytes(const v1::WireBytes& totals);

  // The staleness histogram so far, one entry per bucket of syncopate_shard_staleness (counts
  // per bucket, not cumulative): what the shard reports to the coordinator for the run report.
  std::vector<v1::StalenessBucket> StalenessHistogram() const;

 private:
  const std::string shard_;
  prometheus::Gauge& version_;
  prometheus::Family<prometheus::Gauge>& mode_;
  prometheus::Counter& updates_;
  prometheus::Family<prometheus::Counter>& gradients_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Histogram& staleness_;
  prometheus::Histogram& apply_seconds_;
  prometheus::Histogram& pull_held_seconds_;
  prometheus::Gauge& parameter_bytes_;
  prometheus::Gauge& optimizer_bytes_;
  prometheus::Gauge& embedding_rows_;
  prometheus::Family<prometheus::Gauge>& table_rows_;
  prometheus::Family<prometheus::Gauge>& table_bytes_;
  prometheus::Counter& admitted_;
  prometheus::Family<prometheus::Counter>& unadmitted_;  // by kind: lookup, gradient
  prometheus::Counter& unadmitted_lookups_;
  prometheus::Counter& unadmitted_gradients_;
  prometheus::Counter& evicted_;
  prometheus::Gauge& barrier_waiting_workers_;
  prometheus::Gauge& learning_rate_;
  prometheus::Histogram& look_ahead_updates_;
  metrics::WireBytesMetrics wire_;
};

// The `mode` label values: syncopate::ModeName.
using ::syncopate::ModeName;

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_SHARD_METRICS_H_
