// What a worker counts: examples, the latest loss, step time by phase, and the bytes its Train
// streams moved (v1::WireBytes). The Prometheus
// implementation exports syncopate_worker_* (docs/metrics.md); NoOp() counts nothing (tests).
// Thread-safety: implementations are thread-safe.
#ifndef SYNCOPATE_LIBS_WORKER_WORKER_METRICS_H_
#define SYNCOPATE_LIBS_WORKER_WORKER_METRICS_H_

#include <cstdint>

#include "libs/metrics/wire_bytes_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::worker {

// One training step's phases, in seconds.
struct StepTimes {
  double compute = 0;  // forward + backward, including any slowdown padding
  double pull = 0;     // pull minus the time a shard held it (barrier wait)
  double push = 0;
  double wait = 0;  // the barrier wait
};

class WorkerMetrics {
 public:
  virtual ~WorkerMetrics() = default;
  // `wire`: the worker's running totals after the step (ParameterStore::wire_bytes).
  virtual void RecordStep(int64_t examples, float loss, const StepTimes& times,
                          const v1::WireBytes& wire) = 0;

  // Counts nothing; never destroyed.
  static WorkerMetrics* NoOp();
};

class PrometheusWorkerMetrics final : public WorkerMetrics {
 public:
  explicit PrometheusWorkerMetrics(prometheus::Registry& registry);
  void RecordStep(int64_t examples, float loss, const StepTimes& times,
                  const v1::WireBytes& wire) override;

 private:
  prometheus::Counter& examples_;
  prometheus::Family<prometheus::Histogram>& steps_;
  prometheus::Gauge& loss_;
  prometheus::Histogram& compute_;
  prometheus::Histogram& pull_;
  prometheus::Histogram& push_;
  prometheus::Histogram& wait_;
  metrics::WireBytesMetrics wire_;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_WORKER_METRICS_H_
