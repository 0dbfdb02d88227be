#include <algorithm>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "libs/common/status_macros.h"
#include "libs/sim/simulation_impl.h"
#include "libs/tensor/packed.h"

namespace syncopate::sim::internal {

absl::Status Simulation::EvaluatorHello() {
  evaluator_.session = std::make_shared<WorkerSession>(this, /*worker=*/nullptr);
  v1::WorkerHello hello;
  hello.set_name("evaluator");
  hello.set_role(v1::ROLE_EVALUATOR);
  hello.set_job_id(options_.job.job_id());
  SYNCOPATE_ASSIGN_OR_RETURN(evaluator_.id, coordinator_->WorkerHello(evaluator_.session, hello));
  return absl::OkStatus();
}

absl::Status Simulation::EvaluatorPull(bool& answered) {
  answered = false;
  evaluator_routing_->ShapeRows(eval_rows_);
  int pending = static_cast<int>(shards_.size());
  absl::Status status;
  for (size_t s = 0; s < shards_.size(); ++s) {
    v1::PullRequest request;  // min_version 0: the newest parameters, never held
    request.set_request_id(++evaluator_request_id_);
    for (v1::SparseRows& rows : evaluator_routing_->Requests(static_cast<int32_t>(s))) {
      *request.add_sparse() = std::move(rows);
    }
    const shard::Puller puller{&evaluator_routing_, /*worker=*/0, /*trains=*/false};
    SYNCOPATE_RETURN_IF_ERROR(
        shards_[s]->Pull(puller, request, [&, s](const shard::PullReply& reply) {
          const v1::ShardPartition& p = partitions_[s];
          const v1::PullResponse& response = reply.response;
          absl::Status unpacked = tensor::UnpackFloatsInto(
              tensor::PackedView(*reply.values),
              std::span<float>(params_).subspan(p.flat_begin(), p.flat_end() - p.flat_begin()));
          if (unpacked.ok()) {
            unpacked = evaluator_routing_->ScatterRows(static_cast<int32_t>(s), response.sparse(),
                                                       eval_rows_);
          }
          if (status.ok()) status = unpacked;
          --pending;
        }));
  }
  answered = pending == 0;
  if (!answered) {
    // Never expected (min_version 0 is always due), but a held pull must not outlive the
    // callback's captures.
    for (auto& shard : shards_) shard->CancelPulls(&evaluator_routing_);
  }
  return status;
}

void Simulation::OnEvaluatorMessage(const v1::CoordinatorToWorker& message) {
  if (evaluator_.finished) return;
  if (message.has_stop()) {
    evaluator_.finished = true;
  } else if (message.has_evaluate() && message.evaluate().final()) {
    // The workers have left: the final evaluation measures what the shards hold now.
    evaluator_.finished = true;
    Evaluate(message.evaluate());
  }
}

void Simulation::Evaluate(const v1::EvaluateNow& request) {
  // RunEvaluator, chunk by chunk: route the chunk's keys, pull the newest parameters (no
  // look-ahead) and those rows from every shard as an evaluator (rows never touched read as
  // their initial value and are not created), score. Scoring takes SimSpec.evaluation_seconds
  // (0: no virtual time); the pulls take no shard time.
  for (int64_t begin = 0; begin < eval_->eval_size(); begin += eval_->eval_chunk()) {
    if (absl::Status prepared =
            eval_->PrepareEval(begin, std::min(eval_->eval_size(), begin + eval_->eval_chunk()));
        !prepared.ok()) {
      return Fail(prepared);
    }
    if (absl::Status routed = evaluator_routing_->Route(&eval_->keys()); !routed.ok()) {
      return Fail(routed);
    }
    bool answered = false;
    if (absl::Status pulled = EvaluatorPull(answered); !pulled.ok()) return Fail(pulled);
    if (!answered) return Fail(absl::InternalError("a shard held the evaluator's pull"));
    if (absl::Status scored = eval_->ScoreEval(params_, eval_rows_); !scored.ok()) {
      return Fail(scored);
    }
  }
  absl::StatusOr<model::Evaluation> evaluation = eval_->FinishEval();
  if (!evaluation.ok()) return Fail(evaluation.status());
  const int64_t examples =
      request.final() ? request.at_examples() : coordinator_->Status().examples();
  auto record = [this, e = *evaluation, examples, request] {
    const double quality = result_.quality_metric == "auc" ? e.auc : e.accuracy;
    result_.evaluations.push_back({Now(), examples, e.accuracy, e.mean_loss, e.auc, quality});
    if (options_.target_quality > 0 && !result_.seconds_to_target.has_value() &&
        quality >= options_.target_quality) {
      result_.seconds_to_target = Now();
    }
    if (request.final()) result_.wall_seconds = Now();
    // The report, as RunEvaluator sends it: the coordinator records it in the job's history,
    // and the final one ends the job.
    v1::WorkerMessage message;
    v1::EvalReport* report = message.mutable_eval();
    report->set_accuracy(e.accuracy);
    report->set_loss(e.mean_loss);
    report->set_auc(e.auc);
    report->set_examples(eval_->eval_size());
    report->set_final(request.final());
    report->set_requested_at_examples(request.at_examples());
    report->set_requested_at_seconds(request.at_seconds());
    // Sized before the lambda takes it: the order in which a call's arguments are evaluated is
    // unspecified, so sized in the call it could be measured after the move.
    const int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
    Send(evaluator_thread_.get(), bytes, [this, message = std::move(message)] {
      coordinator_->WorkerMessage(evaluator_.id, message);
    });
  };
  const double seconds = timing_.spec().evaluation_seconds();
  if (seconds == 0) {
    record();
  } else if (evaluator_thread_ != nullptr) {
    evaluator_thread_->Run(seconds, std::move(record));
  } else {
    queue_.After(absl::Seconds(seconds), std::move(record));
  }
}

void Simulation::SchedulePeriodicEval() {
  const double interval = job_.eval().interval_seconds();
  if (!(interval > 0)) return;
  queue_.After(absl::Seconds(interval), [this] {
    if (evaluator_.finished) return;
    Evaluate(v1::EvaluateNow());
    SchedulePeriodicEval();
  });
}

}  // namespace syncopate::sim::internal
