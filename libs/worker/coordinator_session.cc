#include "libs/worker/coordinator_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::worker {

absl::StatusOr<std::unique_ptr<CoordinatorSession>> CoordinatorSession::Open(
    const std::string& address, const v1::WorkerHello& hello, absl::Duration timeout,
    const rpc::TransportSecurity& security, std::function<bool()> abort) {
  auto session = std::unique_ptr<CoordinatorSession>(new CoordinatorSession());
  session->stub_ = v1::Coordinator::NewStub(rpc::CreateChannel(address, security));
  CoordinatorSession* self = session.get();
  session->stream_ =
      std::make_unique<rpc::ClientStream<v1::WorkerMessage, v1::CoordinatorToWorker>>(
          [self](grpc::ClientContext* context) { return self->stub_->WorkerSession(context); },
          [self](v1::CoordinatorToWorker& message) { self->OnMessage(message); },
          [self](const grpc::Status& status) { self->OnEnd(status); });
  v1::WorkerMessage message;
  *message.mutable_hello() = hello;
  session->Send(message);
  // The heartbeat starts with the hello, not the welcome: the coordinator's silence bound runs
  // from the hello, and the welcome may wait for the job to start (every shard registered) and
  // then the role loads its data. The stream keeps the hello first, so a beat never precedes it.
  session->heartbeat_ = std::thread([self] { self->HeartbeatLoop(); });
  {
    absl::MutexLock lock(&session->mu_);
    auto ready = [self]() ABSL_SHARED_LOCKS_REQUIRED(self->mu_) {
      return self->pending_welcome_.has_value() || self->ended_;
    };
    const absl::Time deadline = absl::Now() + timeout;
    while (!session->mu_.AwaitWithDeadline(absl::Condition(&ready),
                                           std::min(deadline, absl::Now() + kAbortPoll))) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no welcome from the coordinator at ",
                                                        address, " within ",
                                                        absl::FormatDuration(timeout)));
      }
      if (abort && abort()) {
        return absl::CancelledError("stopped while waiting for the coordinator's welcome");
      }
    }
    if (!session->pending_welcome_.has_value()) {
      return rpc::FromGrpcStatus(session->end_status_.ok()
                                     ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "session ended")
                                     : session->end_status_);
    }
    session->welcome_ = *session->pending_welcome_;
  }
  return session;
}

CoordinatorSession::~CoordinatorSession() {
  stop_heartbeat_.Notify();
  if (heartbeat_.joinable()) heartbeat_.join();
  stream_.reset();  // cancels and joins the reader
}

bool CoordinatorSession::Send(const v1::WorkerMessage& message) { return stream_->Write(message); }

void CoordinatorSession::OnMessage(v1::CoordinatorToWorker& message) {
  if (message.has_stop()) {
    stop_received_ = true;
    stop_requested_ = true;
  }
  absl::MutexLock lock(&mu_);
  if (message.has_welcome() && !pending_welcome_.has_value()) {
    pending_welcome_ = message.welcome();
    return;
  }
  commands_.push_back(std::move(message));
}

void CoordinatorSession::OnEnd(const grpc::Status& status) {
  stop_requested_ = true;
  absl::MutexLock lock(&mu_);
  ended_ = true;
  end_status_ = status;
}

absl::StatusOr<std::optional<v1::CoordinatorToWorker>> CoordinatorSession::NextCommand(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !commands_.empty() || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!commands_.empty()) {
    v1::CoordinatorToWorker command = std::move(commands_.front());
    commands_.pop_front();
    return command;
  }
  if (ended_) {
    return absl::UnavailableError(
        absl::StrCat("coordinator session ended: ", end_status_.error_message()));
  }
  return std::nullopt;
}

void CoordinatorSession::HeartbeatLoop() {
  v1::WorkerMessage beat;
  beat.mutable_heartbeat();
  while (!stop_heartbeat_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    if (!stream_->Write(beat)) return;
  }
}

}  // namespace syncopate::worker
