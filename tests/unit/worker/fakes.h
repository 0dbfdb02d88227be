// In-memory stand-ins for the cluster as a worker's loops see it: a scripted coordinator, a
// one-shard parameter store that applies SGD, and a one-parameter model. No sockets.
// Thread-safety: FakeCoordinator is thread-safe; the others are thread-compatible.
#ifndef SYNCOPATE_TESTS_UNIT_WORKER_FAKES_H_
#define SYNCOPATE_TESTS_UNIT_WORKER_FAKES_H_

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "libs/worker/coordinator_channel.h"
#include "libs/worker/parameter_store.h"
#include "libs/workload/workload.h"

namespace syncopate::worker::testing {

// Commands are queued by the test or by `on_send`, which sees every message the loop sends.
class FakeCoordinator : public CoordinatorChannel {
 public:
  using Reply = std::function<void(const v1::WorkerMessage&, FakeCoordinator&)>;
  explicit FakeCoordinator(v1::Welcome welcome, Reply on_send = nullptr)
      : welcome_(std::move(welcome)), on_send_(std::move(on_send)) {}

  const v1::Welcome& welcome() const override { return welcome_; }
  bool stop_requested() const override {
    absl::MutexLock lock(&mu_);
    return stop_queued_ || ended_;
  }
  bool job_ended() const override {
    absl::MutexLock lock(&mu_);
    return stop_queued_;
  }
  bool Send(const v1::WorkerMessage& message) override {
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return false;
      sent_.push_back(message);
    }
    if (on_send_) on_send_(message, *this);
    return true;
  }
  absl::StatusOr<std::optional<v1::CoordinatorToWorker>> NextCommand(
      absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || ended_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (!queue_.empty()) {
      v1::CoordinatorToWorker next = std::move(queue_.front());
      queue_.pop_front();
      return next;
    }
    if (ended_) return absl::UnavailableError("coordinator session ended");
    return std::nullopt;
  }

  void Queue(v1::CoordinatorToWorker command) {
    absl::MutexLock lock(&mu_);
    if (command.has_stop()) stop_queued_ = true;
    queue_.push_back(std::move(command));
  }
  void Stop() {
    v1::CoordinatorToWorker stop;
    stop.mutable_stop()->set_reason("test");
    Queue(std::move(stop));
  }
  void End() {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }
  std::vector<v1::WorkerMessage> sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }

 private:
  const v1::Welcome welcome_;
  const Reply on_send_;
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorToWorker> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerMessage> sent_ ABSL_GUARDED_BY(mu_);
  bool stop_queued_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// One shard holding the whole flat vector; a push applies params -= lr · gradient and bumps the
// version. Scripted failures are returned, in order, before the real work.
class FakeParameters : public ParameterStore {
 public:
  FakeParameters(std::vector<float> params, float learning_rate)
      : params_(std::move(params)), learning_rate_(learning_rate) {}

  absl::Status Connect(absl::Duration) override {
    ++connects;
    return Next(connect_failures);
  }
  absl::StatusOr<PullStats> PullAll(std::span<float> params, absl::Duration, bool newest,
                                    const TableKeys*, TableRows* rows) override {
    ++pulls;
    pulled_newest.push_back(newest);
    if (absl::Status failure = Next(pull_failures); !failure.ok()) return failure;
    std::copy(params_.begin(), params_.end(), params.begin());
    if (rows != nullptr) rows->clear();
    pulled_version_ = version_;
    PullStats stats;
    stats.versions = {version_};
    stats.modes = {v1::MODE_ASYNC};
    return stats;
  }
  // With serve_points, every evaluation point exists at once (point n: 10 n examples, made now);
  // without, the store keeps none (UNIMPLEMENTED, as the default).
  absl::StatusOr<PullStats> PullEvalPoint(const EvalPointRead& read, std::span<float> params,
                                          absl::Duration, const TableKeys*,
                                          TableRows* rows) override {
    if (!serve_points) return absl::UnimplementedError("no evaluation points");
    point_reads.push_back(read);
    std::copy(params_.begin(), params_.end(), params.begin());
    if (rows != nullptr) rows->clear();
    PullStats stats;
    stats.versions = {version_};
    stats.eval_points = {read.point};
    stats.point_age_seconds = {0};
    stats.point_examples = {read.point * 10};
    return stats;
  }
  absl::StatusOr<PushStats> PushAll(std::span<const float> gradient, int64_t samples,
                                    absl::Duration, const TableRows*) override {
    if (absl::Status failure = Next(push_failures); !failure.ok()) return failure;
    for (size_t i = 0; i < params_.size(); ++i) params_[i] -= learning_rate_ * gradient[i];
    ++version_;
    pushed_samples.push_back(samples);
    PushStats stats;
    stats.applied = 1;
    return stats;
  }
  int64_t token(size_t) const override { return pulled_version_; }

  const std::vector<float>& params() const { return params_; }
  int64_t version() const { return version_; }

  std::deque<absl::Status> connect_failures, pull_failures, push_failures;
  bool serve_points = false;
  std::vector<EvalPointRead> point_reads;
  int connects = 0;
  int pulls = 0;
  std::vector<bool> pulled_newest;
  std::vector<int64_t> pushed_samples;

 private:
  static absl::Status Next(std::deque<absl::Status>& failures) {
    if (failures.empty()) return absl::OkStatus();
    absl::Status next = failures.front();
    failures.pop_front();
    return next;
  }
  std::vector<float> params_;
  const float learning_rate_;
  int64_t version_ = 0;
  int64_t pulled_version_ = 0;
};

// One parameter w fitted to `target`: loss (w − target)², gradient 2(w − target), whatever the
// batch. It records the examples it trained on; evaluation counts the chunks it scored.
class FakeWorkload : public workload::Workload {
 public:
  explicit FakeWorkload(float target, int64_t eval_size = 10, int64_t eval_chunk = 4)
      : target_(target), eval_size_(eval_size), eval_chunk_(eval_chunk) {}

  const std::vector<int32_t>& table_dims() const override { return dims_; }
  int64_t num_parameters() const override { return 1; }
  const workload::TableKeys& keys() const override { return keys_; }
  int64_t train_size() const override { return 1000; }
  absl::Status PrepareTrain(std::span<const int64_t> examples) override {
    for (int64_t e : examples) trained.push_back(e);
    return absl::OkStatus();
  }
  absl::StatusOr<float> TrainStep(std::span<const float> params, const workload::TableRows&,
                                  std::span<float> dense_grad, workload::TableRows&) override {
    const float d = params[0] - target_;
    dense_grad[0] = 2 * d;
    return d * d;
  }
  int64_t eval_size() const override { return eval_size_; }
  int64_t eval_chunk() const override { return eval_chunk_; }
  absl::Status PrepareEval(int64_t begin, int64_t end) override {
    chunks.emplace_back(begin, end);
    prepared_ += end - begin;
    return absl::OkStatus();
  }
  absl::Status ScoreEval(std::span<const float> params, const workload::TableRows&) override {
    last_scored = params[0];
    return absl::OkStatus();
  }
  absl::StatusOr<model::Evaluation> FinishEval() override {
    if (!auc_sequence.empty()) {
      auc = auc_sequence.front();
      auc_sequence.pop_front();
    }
    const int64_t examples = std::exchange(prepared_, 0);
    return model::Evaluation{.accuracy = 0.5,
                             .mean_loss = 0.25,
                             .auc = auc,
                             .examples = examples,
                             .auc_standard_error = auc_standard_error};
  }

  double auc = 0.75;  // what FinishEval reports (the next of auc_sequence while there is one)
  std::deque<double> auc_sequence;
  double auc_standard_error = 0;
  std::vector<int64_t> trained;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  float last_scored = 0;

 private:
  const float target_;
  const int64_t eval_size_;
  const int64_t eval_chunk_;
  int64_t prepared_ = 0;  // examples prepared since the last FinishEval: what it reports
  const std::vector<int32_t> dims_;
  const workload::TableKeys keys_;
};

}  // namespace syncopate::worker::testing

#endif  // SYNCOPATE_TESTS_UNIT_WORKER_FAKES_H_
