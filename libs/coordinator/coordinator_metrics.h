// The coordinator's Prometheus metrics (names in docs/metrics.md).
// Thread-safety: thread-safe (prometheus-cpp metrics are).
#ifndef SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_METRICS_H_
#define SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_METRICS_H_

#include <string>

#include "libs/coordinator/mode_controller.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace syncopate::coordinator {

class CoordinatorMetrics final : public ModeControlMetrics {
 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);

  // The default when nobody exports metrics (tests, the simulator): counts into a registry no
  // exposer serves. Never destroyed; thread-safe like any other instance.
  static CoordinatorMetrics* NoOp();

  void SetMembers(int workers) { members_.Set(workers); }
  void SetJobState(int state) { job_state_.Set(state); }
  void AddExamples(const std::string& worker, double examples);
  void SetWorkerLoss(const std::string& worker, double loss);
  // The latest evaluation: its scores, the training examples applied to the parameters it
  // measured and the job time those parameters existed (an evaluation point's, ADR 0015).
  void SetEval(double accuracy, double loss, double auc, double examples, double job_seconds);
  void CountDeparture(const std::string& reason);
  void SetSlowdown(const std::string& worker, double slowdown, bool straggler);
  void SetStragglers(int count) { stragglers_.Set(count); }
  // Starts a shard's decision and switch counters at 0 for every reason, so the first switch is
  // an increase Prometheus sees (a counter born at 1 loses its first increment to rate()).
  void InitModePolicy(int shard) override;
  void CountDecision(int shard, const std::string& reason) override;
  void CountSwitch(int shard, const std::string& reason) override;
  void SetPrediction(int shard, double sync_samples_per_second, double gba_samples_per_second,
                     double gba_efficiency) override;
  // A refused session hello, by reason ("unauthenticated": missing or wrong join token;
  // "wrong_job": the hello names another job) and session ("worker" or "shard").
  void CountRejection(const std::string& session, const std::string& reason);
  // Whether shard's current sync barrier still waits for the worker's gradient.
  void SetBarrierWaiting(int shard, const std::string& worker, bool waiting);

 private:
  prometheus::Gauge& members_;
  prometheus::Gauge& job_state_;
  prometheus::Family<prometheus::Counter>& examples_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Gauge& eval_accuracy_;
  prometheus::Gauge& eval_loss_;
  prometheus::Gauge& eval_auc_;
  prometheus::Gauge& eval_examples_;
  prometheus::Gauge& eval_job_seconds_;
  prometheus::Family<prometheus::Counter>& departures_;
  prometheus::Family<prometheus::Gauge>& slowdown_;
  prometheus::Family<prometheus::Gauge>& straggler_;
  prometheus::Gauge& stragglers_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& switches_;
  prometheus::Family<prometheus::Gauge>& predicted_throughput_;
  prometheus::Family<prometheus::Gauge>& gba_efficiency_;
  prometheus::Family<prometheus::Gauge>& barrier_waiting_;
  prometheus::Family<prometheus::Counter>& rejections_;
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_COORDINATOR_METRICS_H_
