#include "libs/coordinator/coordinator_metrics.h"

#include "libs/common/mode_rules.h"
#include "libs/straggler/mode_policy.h"
#include "libs/straggler/switch_confirmation.h"

namespace syncopate::coordinator {

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& registry)
    : members_(prometheus::BuildGauge()
                   .Name("syncopate_coordinator_members")
                   .Help("Workers in the training membership")
                   .Register(registry)
                   .Add({})),
      job_state_(prometheus::BuildGauge()
                     .Name("syncopate_coordinator_job_state")
                     .Help("Job state: 1 waiting, 2 running, 3 finishing, 4 done")
                     .Register(registry)
                     .Add({})),
      examples_(prometheus::BuildCounter()
                    .Name("syncopate_coordinator_examples_total")
                    .Help("Training examples reported by workers")
                    .Register(registry)),
      loss_(prometheus::BuildGauge()
                .Name("syncopate_coordinator_worker_loss")
                .Help("Latest training loss reported by each worker")
                .Register(registry)),
      eval_accuracy_(prometheus::BuildGauge()
                         .Name("syncopate_eval_accuracy")
                         .Help("Test accuracy of the latest evaluation (0..1)")
                         .Register(registry)
                         .Add({})),
      eval_loss_(prometheus::BuildGauge()
                     .Name("syncopate_eval_logloss")
                     .Help("Test cross-entropy of the latest evaluation")
                     .Register(registry)
                     .Add({})),
      eval_auc_(prometheus::BuildGauge()
                    .Name("syncopate_eval_auc")
                    .Help("Test ROC AUC of the latest evaluation (one-vs-rest, macro-averaged)")
                    .Register(registry)
                    .Add({})),
      eval_examples_(prometheus::BuildGauge()
                         .Name("syncopate_eval_examples")
                         .Help("Training examples applied to the parameters the latest evaluation "
                               "measured")
                         .Register(registry)
                         .Add({})),
      eval_job_seconds_(prometheus::BuildGauge()
                            .Name("syncopate_eval_job_seconds")
                            .Help("Job time at which the parameters the latest evaluation "
                                  "measured existed")
                            .Register(registry)
                            .Add({})),
      departures_(prometheus::BuildCounter()
                      .Name("syncopate_coordinator_worker_departures_total")
                      .Help("Workers removed from membership, by reason")
                      .Register(registry)),
      slowdown_(prometheus::BuildGauge()
                    .Name("syncopate_coordinator_worker_slowdown")
                    .Help("Median compute time of a worker over the cluster median (1 = typical)")
                    .Register(registry)),
      straggler_(prometheus::BuildGauge()
                     .Name("syncopate_coordinator_worker_straggler")
                     .Help("1 while the straggler detector flags the worker")
                     .Register(registry)),
      stragglers_(prometheus::BuildGauge()
                      .Name("syncopate_coordinator_stragglers")
                      .Help("Workers currently flagged as stragglers")
                      .Register(registry)
                      .Add({})),
      decisions_(prometheus::BuildCounter()
                     .Name("syncopate_coordinator_mode_decisions_total")
                     .Help("Mode-policy verdicts per shard, by reason (switches and holds)")
                     .Register(registry)),
      switches_(prometheus::BuildCounter()
                    .Name("syncopate_coordinator_mode_switches_total")
                    .Help("Mode switches the coordinator ordered, per shard and reason")
                    .Register(registry)),
      predicted_throughput_(
          prometheus::BuildGauge()
              .Name("syncopate_coordinator_predicted_samples_per_second")
              .Help("The mode policy's last predicted throughput per shard and mode (sync, gba; "
                    "gba counts decayed gradients at their weight, before efficiency)")
              .Register(registry)),
      gba_efficiency_(prometheus::BuildGauge()
                          .Name("syncopate_coordinator_gba_efficiency")
                          .Help("Per-sample efficiency of gba relative to sync at its predicted "
                                "staleness, from the whole model's measured staleness cost (1 = "
                                "not measured yet); gba goodput = gba throughput x this")
                          .Register(registry)),
      barrier_waiting_(prometheus::BuildGauge()
                           .Name("syncopate_coordinator_barrier_waiting")
                           .Help("1 while the shard's sync barrier waits for the worker's gradient "
                                 "(from the shard's latest report)")
                           .Register(registry)),
      rejections_(prometheus::BuildCounter()
                      .Name("syncopate_coordinator_rejections_total")
                      .Help("Refused session hellos by session kind and reason")
                      .Register(registry)) {
  // Born at 0 so the first refusal is an increase rate() sees.
  for (const char* session : {"worker", "shard"}) {
    for (const char* reason : {"unauthenticated", "wrong_job"}) {
      rejections_.Add({{"session", session}, {"reason", reason}});
    }
  }
}

CoordinatorMetrics* CoordinatorMetrics::NoOp() {
  static auto* const kRegistry = new prometheus::Registry();
  static auto* const kNoOp = new CoordinatorMetrics(*kRegistry);
  return kNoOp;
}

void CoordinatorMetrics::CountRejection(const std::string& session, const std::string& reason) {
  rejections_.Add({{"session", session}, {"reason", reason}}).Increment();
}

void CoordinatorMetrics::SetSlowdown(const std::string& worker, double slowdown, bool straggler) {
  slowdown_.Add({{"worker", worker}}).Set(slowdown);
  straggler_.Add({{"worker", worker}}).Set(straggler ? 1 : 0);
}

void CoordinatorMetrics::InitModePolicy(int shard) {
  for (absl::string_view reason :
       {kReasonPinned, kReasonInsufficientData, kReasonHoldMinDwell, kReasonNoSignificantDifference,
        kReasonStragglerDetected, kReasonGbaPredictedFaster, kReasonSyncPredictedFaster,
        kReasonStalenessCostExceedsGain, kReasonStragglersRecovered, kReasonAwaitingConfirmation,
        kReasonTrainingLossRose, kReasonTrainingLossBackoff}) {
    const prometheus::Labels labels = {{"shard", std::to_string(shard)},
                                       {"reason", std::string(reason)}};
    decisions_.Add(labels);
    switches_.Add(labels);
  }
}

void CoordinatorMetrics::CountDecision(int shard, const std::string& reason) {
  decisions_.Add({{"shard", std::to_string(shard)}, {"reason", reason}}).Increment();
}

void CoordinatorMetrics::CountSwitch(int shard, const std::string& reason) {
  switches_.Add({{"shard", std::to_string(shard)}, {"reason", reason}}).Increment();
}

void CoordinatorMetrics::SetPrediction(int shard, double sync_samples_per_second,
                                       double gba_samples_per_second, double gba_efficiency) {
  const std::string id = std::to_string(shard);
  // The policy's two candidates, labelled with their names (the mode table's).
  predicted_throughput_.Add({{"shard", id}, {"mode", ModeName(v1::MODE_SYNC)}})
      .Set(sync_samples_per_second);
  predicted_throughput_.Add({{"shard", id}, {"mode", ModeName(v1::MODE_GBA)}})
      .Set(gba_samples_per_second);
  gba_efficiency_.Add({{"shard", id}}).Set(gba_efficiency);
}

void CoordinatorMetrics::AddExamples(const std::string& worker, double examples) {
  examples_.Add({{"worker", worker}}).Increment(examples);
}

void CoordinatorMetrics::SetWorkerLoss(const std::string& worker, double loss) {
  loss_.Add({{"worker", worker}}).Set(loss);
}

void CoordinatorMetrics::SetEval(double accuracy, double loss, double auc, double examples,
                                 double job_seconds) {
  eval_accuracy_.Set(accuracy);
  eval_loss_.Set(loss);
  eval_auc_.Set(auc);
  eval_examples_.Set(examples);
  eval_job_seconds_.Set(job_seconds);
}

void CoordinatorMetrics::SetBarrierWaiting(int shard, const std::string& worker, bool waiting) {
  barrier_waiting_.Add({{"shard", std::to_string(shard)}, {"worker", worker}}).Set(waiting ? 1 : 0);
}

void CoordinatorMetrics::CountDeparture(const std::string& reason) {
  departures_.Add({{"reason", reason}}).Increment();
}

}  // namespace syncopate::coordinator
