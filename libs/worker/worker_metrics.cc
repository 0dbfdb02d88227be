#include "libs/worker/worker_metrics.h"

#include "libs/metrics/buckets.h"

namespace syncopate::worker {
namespace {

class NoOpWorkerMetrics final : public WorkerMetrics {
 public:
  void RecordStep(int64_t, float, const StepTimes&, const v1::WireBytes&) override {}
};

}  // namespace

WorkerMetrics* WorkerMetrics::NoOp() {
  static auto* const kNoOp = new NoOpWorkerMetrics();
  return kNoOp;
}

PrometheusWorkerMetrics::PrometheusWorkerMetrics(prometheus::Registry& registry)
    : examples_(prometheus::BuildCounter()
                    .Name("syncopate_worker_examples_total")
                    .Help("Training examples this worker computed gradients on")
                    .Register(registry)
                    .Add({})),
      steps_(prometheus::BuildHistogram()
                 .Name("syncopate_worker_step_seconds")
                 .Help("Step time by phase: compute (incl. slowdown padding), pull, push, wait")
                 .Register(registry)),
      loss_(prometheus::BuildGauge()
                .Name("syncopate_worker_loss")
                .Help("Training loss of the latest step")
                .Register(registry)
                .Add({})),
      compute_(steps_.Add({{"phase", "compute"}}, metrics::SecondsBuckets())),
      pull_(steps_.Add({{"phase", "pull"}}, metrics::SecondsBuckets())),
      push_(steps_.Add({{"phase", "push"}}, metrics::SecondsBuckets())),
      wait_(steps_.Add({{"phase", "wait"}}, metrics::SecondsBuckets())),
      wire_(prometheus::BuildCounter()
                .Name("syncopate_worker_wire_bytes_total")
                .Help("Bytes this worker's Train streams moved, by direction and part (dense "
                      "payload, embedding keys and rows, message header)")
                .Register(registry)) {}

void PrometheusWorkerMetrics::RecordStep(int64_t examples, float loss, const StepTimes& times,
                                         const v1::WireBytes& wire) {
  examples_.Increment(static_cast<double>(examples));
  loss_.Set(loss);
  compute_.Observe(times.compute);
  pull_.Observe(times.pull);
  push_.Observe(times.push);
  wait_.Observe(times.wait);
  wire_.Update(wire);
}

}  // namespace syncopate::worker
