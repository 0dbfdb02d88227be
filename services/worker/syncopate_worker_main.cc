// syncopate-worker: a model replica. Pulls parameters from every shard, computes gradients on
// leased data blocks and pushes them back; reports step times to the coordinator.
// With --role=evaluator it instead measures the newest parameters on the test set.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/data/lease_table.h"
#include "libs/metrics/metrics_server.h"
#include "libs/rpc/grpc_util.h"
#include "libs/runtime/process_runtime.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/parameter_client.h"
#include "libs/worker/slowdown_schedule.h"
#include "libs/workload/workload.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "Coordinator address (host:port)");
ABSL_FLAG(std::string, name, "", "Stable worker name (default: the host name)");
ABSL_FLAG(std::string, role, "worker", "worker | evaluator");
ABSL_FLAG(double, slowdown, 1.0,
          "Pad each step's compute to this multiple of its real time (emulates a slower "
          "machine without using more CPU); >= 1");
ABSL_FLAG(std::string, slowdown_schedule, "",
          "Time-varying slowdown since training started, e.g. 0s:1,20s:4,60s:1 (overrides "
          "--slowdown)");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9102", "Prometheus /metrics address");
ABSL_FLAG(std::string, ready_file, "", "If set, write metrics_port here once running");
ABSL_FLAG(int, join_timeout_seconds, 600, "Give up if no welcome arrives within this time");

namespace syncopate::worker {
namespace {

// Generous bounds: a sync pull legitimately waits for the slowest member's step, and the
// coordinator removes a dead member within its silence timeout, well inside these.
constexpr absl::Duration kPullTimeout = absl::Seconds(120);
constexpr absl::Duration kPushTimeout = absl::Seconds(60);
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
constexpr absl::Duration kLeaseTimeout = absl::Seconds(60);

struct WorkerMetrics {
  explicit WorkerMetrics(prometheus::Registry& registry)
      : examples(prometheus::BuildCounter()
                     .Name("syncopate_worker_examples_total")
                     .Help("Training examples this worker computed gradients on")
                     .Register(registry)
                     .Add({})),
        steps(prometheus::BuildHistogram()
                  .Name("syncopate_worker_step_seconds")
                  .Help("Step time by phase: compute (incl. slowdown padding), pull, push, wait")
                  .Register(registry)),
        loss(prometheus::BuildGauge()
                 .Name("syncopate_worker_loss")
                 .Help("Training loss of the latest step")
                 .Register(registry)
                 .Add({})),
        compute(steps.Add({{"phase", "compute"}}, metrics::SecondsBuckets())),
        pull(steps.Add({{"phase", "pull"}}, metrics::SecondsBuckets())),
        push(steps.Add({{"phase", "push"}}, metrics::SecondsBuckets())),
        wait(steps.Add({{"phase", "wait"}}, metrics::SecondsBuckets())) {}
  prometheus::Counter& examples;
  prometheus::Family<prometheus::Histogram>& steps;
  prometheus::Gauge& loss;
  prometheus::Histogram& compute;
  prometheus::Histogram& pull;
  prometheus::Histogram& push;
  prometheus::Histogram& wait;
};

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// A shard's refusal that retrying cannot fix: a wrong join token, another job's shard, or a
// request it can never accept. The process exits with the reason instead of retrying forever.
bool Refused(const absl::Status& status) {
  return absl::IsUnauthenticated(status) || absl::IsFailedPrecondition(status) ||
         absl::IsInvalidArgument(status);
}

// Examples this worker still has to visit, from the leases it holds, in visiting order.
struct LeasedExamples {
  std::deque<int64_t> order;
  std::deque<std::pair<int64_t, int64_t>> lease_ends;  // (lease id, examples left in it)
  std::vector<int64_t> completed;                      // to report with the next request
  bool request_outstanding = false;

  void Add(const v1::DataLease& lease) {
    std::vector<int64_t> examples = data::LeaseExampleOrder(lease);
    order.insert(order.end(), examples.begin(), examples.end());
    lease_ends.emplace_back(lease.lease_id(), static_cast<int64_t>(examples.size()));
    request_outstanding = false;
  }
  void Take(int64_t n, std::vector<int64_t>& out) {
    out.assign(order.begin(), order.begin() + n);
    order.erase(order.begin(), order.begin() + n);
    while (n > 0 && !lease_ends.empty()) {
      const int64_t used = std::min(n, lease_ends.front().second);
      lease_ends.front().second -= used;
      n -= used;
      if (lease_ends.front().second == 0) {
        completed.push_back(lease_ends.front().first);
        lease_ends.pop_front();
      }
    }
  }
};

class Trainer {
 public:
  Trainer(CoordinatorSession& session, WorkerMetrics& metrics, SlowdownSchedule slowdown,
          std::string join_token)
      : session_(session),
        m_(metrics),
        slowdown_(std::move(slowdown)),
        join_token_(std::move(join_token)) {}

  absl::Status Run() {
    const v1::Welcome& welcome = session_.welcome();
    const v1::JobSpec& job = welcome.job();
    local_batch_ = welcome.local_batch();
    absl::StatusOr<std::unique_ptr<workload::Workload>> work =
        workload::CreateWorkload(job, workload::Purpose::kTrain);
    if (!work.ok()) return work.status();
    workload::Workload& model = **work;
    ParameterClient client(
        welcome.shard_map(), welcome.worker_id(), v1::ROLE_WORKER,
        [this] { return session_.stop_requested() || runtime::ShutdownRequested(); }, join_token_,
        job.job_id(), model.table_dims());
    std::vector<float> params(model.num_parameters());
    std::vector<float> grad(model.num_parameters());
    workload::TableRows rows, row_grads;
    std::vector<int64_t> batch;  // kept across a failed pull: its examples are already leased
    rpc::Backoff backoff;
    const absl::Time training_start = absl::Now();
    LOG(INFO) << "worker " << welcome.worker_id() << " training with local batch " << local_batch_;

    for (int64_t step = 0; !runtime::ShutdownRequested(); ++step) {
      absl::StatusOr<bool> keep_going = HandleCommands(absl::ZeroDuration());
      if (!keep_going.ok()) return keep_going.status();
      if (!*keep_going) return absl::OkStatus();
      if (batch.empty()) {
        absl::StatusOr<bool> have_data = EnsureData();
        if (!have_data.ok()) return have_data.status();
        if (!*have_data) return absl::OkStatus();
        leased_.Take(std::min<int64_t>(local_batch_, leased_.order.size()), batch);
        // The rows to pull depend on the batch, so it is chosen before the pull.
        model.PrepareTrain(batch);
      }

      absl::Status connected = client.Connect(kConnectTimeout);
      if (Refused(connected)) return connected;
      if (!connected.ok()) {
        LOG(WARNING) << connected;
        runtime::WaitForShutdown(backoff.Next());
        continue;
      }
      const absl::Time pull_start = absl::Now();
      absl::StatusOr<PullStats> pulled =
          client.PullAll(params, kPullTimeout, /*newest=*/false, &model.keys(), &rows);
      if (absl::IsCancelled(pulled.status())) continue;  // stopping: the loop head decides
      if (Refused(pulled.status())) return pulled.status();
      if (!pulled.ok()) {
        LOG(WARNING) << "pull failed: " << pulled.status();
        runtime::WaitForShutdown(backoff.Next());
        continue;
      }
      const double pull_seconds = Seconds(pull_start) - pulled->held_seconds;

      const int64_t b = static_cast<int64_t>(batch.size());
      batch.clear();
      const absl::Time compute_start = absl::Now();
      absl::StatusOr<float> loss = model.TrainStep(params, rows, grad, row_grads);
      if (!loss.ok()) return loss.status();
      const double compute_seconds = Seconds(compute_start);
      const double slowdown = slowdown_.At(absl::Now() - training_start);
      if (slowdown > 1.0) {
        // Sleep rather than spin: a slower machine, not a busier one.
        absl::SleepFor(absl::Seconds(compute_seconds * (slowdown - 1.0)));
      }
      const double padded_compute = Seconds(compute_start);

      const absl::Time push_start = absl::Now();
      absl::StatusOr<PushStats> pushed = client.PushAll(grad, b, kPushTimeout, &row_grads);
      if (absl::IsCancelled(pushed.status())) continue;
      if (Refused(pushed.status())) return pushed.status();
      if (!pushed.ok()) {
        LOG(WARNING) << "push failed: " << pushed.status();
        runtime::WaitForShutdown(backoff.Next());
        continue;
      }
      for (const v1::PushAck& rejection : pushed->rejections) {
        LOG(WARNING) << "push rejected: " << rejection.message();
      }
      backoff.Reset();
      const double push_seconds = Seconds(push_start);

      v1::WorkerMessage report;
      v1::StepReport* r = report.mutable_step();
      r->set_step(step);
      r->set_examples(b);
      r->set_loss(*loss);
      r->set_compute_seconds(padded_compute);
      r->set_pull_seconds(pull_seconds);
      r->set_push_seconds(push_seconds);
      r->set_wait_seconds(pulled->held_seconds);
      r->set_token(client.token(0));
      session_.Send(report);
      m_.examples.Increment(static_cast<double>(b));
      m_.loss.Set(*loss);
      m_.compute.Observe(padded_compute);
      m_.pull.Observe(pull_seconds);
      m_.push.Observe(push_seconds);
      m_.wait.Observe(pulled->held_seconds);
    }
    return absl::OkStatus();
  }

 private:
  // Applies queued commands, waiting up to `wait` for the first. False once told to stop.
  absl::StatusOr<bool> HandleCommands(absl::Duration wait) {
    for (;;) {
      absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command = session_.NextCommand(wait);
      if (!command.ok()) return command.status();
      if (!command->has_value()) return true;
      wait = absl::ZeroDuration();
      const v1::CoordinatorToWorker& c = **command;
      if (c.has_stop()) {
        LOG(INFO) << "stopping: " << c.stop().reason();
        return false;
      }
      if (c.has_lease()) leased_.Add(c.lease());
      if (c.has_set_local_batch()) {
        local_batch_ = c.set_local_batch().local_batch();
        LOG(INFO) << "local batch is now " << local_batch_;
      }
    }
  }

  // Keeps at least two batches of leased examples, asking for the next block ahead of time.
  absl::StatusOr<bool> EnsureData() {
    const absl::Time deadline = absl::Now() + kLeaseTimeout;
    while (static_cast<int64_t>(leased_.order.size()) < 2 * local_batch_) {
      if (!leased_.request_outstanding) {
        v1::WorkerMessage request;
        for (int64_t id : leased_.completed)
          request.mutable_lease_request()->add_completed_lease_ids(id);
        request.mutable_lease_request();
        leased_.completed.clear();
        leased_.request_outstanding = true;
        session_.Send(request);
      }
      if (static_cast<int64_t>(leased_.order.size()) >= local_batch_) return true;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError("no data lease from the coordinator");
      }
      absl::StatusOr<bool> keep_going = HandleCommands(absl::Milliseconds(200));
      if (!keep_going.ok() || !*keep_going) return keep_going;
      if (runtime::ShutdownRequested()) return false;
    }
    return true;
  }

  CoordinatorSession& session_;
  WorkerMetrics& m_;
  const SlowdownSchedule slowdown_;
  const std::string join_token_;
  int64_t local_batch_ = 0;
  LeasedExamples leased_;
};

// After the final report: stay until the coordinator says the job is done. If the coordinator
// dies before it has recorded the report, the session breaks (UNAVAILABLE) and the evaluator
// rejoins the restarted coordinator, which asks for the final evaluation again; exiting at once
// would leave it waiting for a report nobody sends. Bounded: a live coordinator marks the job
// done right after the report.
absl::Status AwaitJobDone(CoordinatorSession& session) {
  constexpr absl::Duration kLinger = absl::Seconds(30);
  const absl::Time deadline = absl::Now() + kLinger;
  while (!runtime::ShutdownRequested() && absl::Now() < deadline) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command =
        session.NextCommand(std::min(absl::Seconds(1), deadline - absl::Now()));
    if (!command.ok()) return command.status();
    if (command->has_value() && (*command)->has_stop()) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status RunEvaluator(CoordinatorSession& session, const std::string& join_token) {
  const v1::Welcome& welcome = session.welcome();
  const v1::JobSpec& job = welcome.job();
  absl::StatusOr<std::unique_ptr<workload::Workload>> work =
      workload::CreateWorkload(job, workload::Purpose::kEvaluate);
  if (!work.ok()) return work.status();
  workload::Workload& model = **work;
  ParameterClient client(
      welcome.shard_map(), welcome.worker_id(), v1::ROLE_EVALUATOR,
      [] { return runtime::ShutdownRequested(); }, join_token, job.job_id(), model.table_dims());
  std::vector<float> params(model.num_parameters());
  workload::TableRows rows;
  rpc::Backoff backoff;
  const absl::Duration interval = absl::Seconds(job.eval().interval_seconds());
  absl::Time next_eval = absl::Now() + interval;
  while (!runtime::ShutdownRequested()) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command =
        session.NextCommand(std::max(absl::ZeroDuration(), next_eval - absl::Now()));
    if (!command.ok()) return command.status();
    v1::EvaluateNow request;
    if (command->has_value()) {
      if ((*command)->has_stop()) return absl::OkStatus();
      if (!(*command)->has_evaluate()) continue;
      request = (*command)->evaluate();
    } else {
      next_eval = absl::Now() + interval;
    }
    absl::Status connected = client.Connect(kConnectTimeout);
    if (Refused(connected)) return connected;
    // Chunk by chunk: each pulls the newest dense parameters and the rows its examples touch.
    // The versions reported are the first chunk's (the final evaluation runs after training
    // stopped, so there every chunk sees the same parameters).
    absl::Status scored = connected;
    std::vector<int64_t> versions;
    for (int64_t begin = 0; scored.ok() && begin < model.eval_size(); begin += model.eval_chunk()) {
      model.PrepareEval(begin, std::min(model.eval_size(), begin + model.eval_chunk()));
      absl::StatusOr<PullStats> pulled =
          client.PullAll(params, kPullTimeout, /*newest=*/true, &model.keys(), &rows);
      if (!pulled.ok()) {
        scored = pulled.status();
        break;
      }
      if (versions.empty()) versions = pulled->versions;
      scored = model.ScoreEval(params, rows);
    }
    absl::StatusOr<model::Evaluation> eval = model.FinishEval();
    if (Refused(scored)) return scored;
    if (!scored.ok()) {
      LOG(WARNING) << "evaluator pull failed: " << scored;
      runtime::WaitForShutdown(backoff.Next());
      continue;
    }
    if (!eval.ok()) return eval.status();
    v1::WorkerMessage report;
    v1::EvalReport* r = report.mutable_eval();
    r->set_accuracy(eval->accuracy);
    r->set_loss(eval->mean_loss);
    r->set_auc(eval->auc);
    r->set_examples(eval->examples);
    r->set_final(request.final());
    r->set_requested_at_examples(request.at_examples());
    r->set_requested_at_seconds(request.at_seconds());
    for (int64_t v : versions) r->add_shard_versions(v);
    session.Send(report);
    LOG(INFO) << "accuracy " << eval->accuracy << " auc " << eval->auc << " at versions "
              << (versions.empty() ? -1 : versions[0]) << (request.final() ? " (final)" : "");
    if (request.final()) return AwaitJobDone(session);
  }
  return absl::OkStatus();
}

// Joins the job, retrying with backoff while the coordinator is unreachable (not up yet in
// compose or Kubernetes, or restarting). Null when shutdown was requested or the job is over;
// exits on a refusal.
std::unique_ptr<CoordinatorSession> Join(const v1::WorkerHello& hello) {
  const absl::Time give_up = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_join_timeout_seconds));
  rpc::Backoff backoff(absl::Milliseconds(200), absl::Seconds(5));
  while (!runtime::ShutdownRequested()) {
    absl::StatusOr<std::unique_ptr<CoordinatorSession>> opened = CoordinatorSession::Open(
        absl::GetFlag(FLAGS_coordinator), hello, std::max(absl::Seconds(1), give_up - absl::Now()));
    if (opened.ok()) return *std::move(opened);
    if (absl::IsOutOfRange(opened.status())) {
      // The job ended before this worker (re)joined: nothing left to do, which is success.
      LOG(INFO) << opened.status().message() << ": nothing to do";
      return nullptr;
    }
    if (!rpc::IsRetryable(rpc::ToGrpcStatus(opened.status()))) {
      runtime::Die(std::string(opened.status().message()), 1);
    }
    if (absl::Now() > give_up) runtime::Die("could not join: " + opened.status().ToString(), 1);
    runtime::WaitForShutdown(backoff.Next());
  }
  return nullptr;
}

int Main() {
  const std::string role = absl::GetFlag(FLAGS_role);
  if (role != "worker" && role != "evaluator") {
    runtime::Die("--role must be worker or evaluator, got '" + role + "'");
  }
  if (!(absl::GetFlag(FLAGS_slowdown) >= 1.0)) runtime::Die("--slowdown must be >= 1");
  absl::StatusOr<rpc::SecurityConfig> security = rpc::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  rpc::InstallTransportSecurity(security->transport);
  SlowdownSchedule slowdown(absl::GetFlag(FLAGS_slowdown));
  if (!absl::GetFlag(FLAGS_slowdown_schedule).empty()) {
    absl::StatusOr<SlowdownSchedule> parsed =
        SlowdownSchedule::Parse(absl::GetFlag(FLAGS_slowdown_schedule));
    if (!parsed.ok())
      runtime::Die("--slowdown_schedule: " + std::string(parsed.status().message()));
    slowdown = *parsed;
  }
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen));
  if (!metrics_server.ok()) runtime::Die(std::string(metrics_server.status().message()), 1);
  WorkerMetrics metrics((*metrics_server)->registry());
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written =
        runtime::WriteKeyValueFile(absl::GetFlag(FLAGS_ready_file),
                                   {{"metrics_port", std::to_string((*metrics_server)->port())}});
    if (!written.ok()) runtime::Die(std::string(written.message()), 1);
  }
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    name = host;
  }
  v1::WorkerHello hello;
  hello.set_name(name);
  hello.set_role(role == "worker" ? v1::ROLE_WORKER : v1::ROLE_EVALUATOR);
  hello.set_join_token(security->join_token);

  // Run the role; when the coordinator is lost (it died and is restarting), rejoin under the
  // same name (which keeps the worker id) and carry on. Every join waits at most
  // --join_timeout_seconds.
  for (int joins = 0;; ++joins) {
    std::unique_ptr<CoordinatorSession> session = Join(hello);
    if (session == nullptr) return 0;  // shutdown requested, or the job is already over
    LOG(INFO) << name << (joins == 0 ? " joined" : " rejoined") << " as "
              << session->welcome().worker_id();
    // A rejoin (after the coordinator restarted) names the job we were in: a coordinator now
    // running another job refuses us rather than handing us its model.
    hello.set_job_id(session->welcome().job().job_id());
    absl::Status status = role == "worker"
                              ? Trainer(*session, metrics, slowdown, security->join_token).Run()
                              : RunEvaluator(*session, security->join_token);
    if (absl::IsUnavailable(status) && !runtime::ShutdownRequested()) {
      LOG(WARNING) << "lost the coordinator (" << status.message() << "); rejoining";
      continue;
    }
    if (!status.ok()) {
      LOG(ERROR) << status;
      return 1;
    }
    break;
  }
  LOG(INFO) << name << " done";
  return 0;
}

}  // namespace
}  // namespace syncopate::worker

int main(int argc, char** argv) {
  syncopate::runtime::InitProcess(argc, argv,
                                  "syncopate-worker --coordinator=HOST:PORT [--role=evaluator] "
                                  "[flags]\nTrains (or evaluates) a model replica.");
  return syncopate::worker::Main();
}
