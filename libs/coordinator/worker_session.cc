// Coordinator.WorkerSession: hello -> welcome, then step reports up and commands down.
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/bidi_stream.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::coordinator {
namespace {

class WorkerSessionStream final
    : public rpc::BidiStream<v1::WorkerMessage, v1::CoordinatorToWorker> {
 public:
  using Base = rpc::BidiStream<v1::WorkerMessage, v1::CoordinatorToWorker>;

 public:
  WorkerSessionStream(const CoordinatorService* service, CoordinatorCore* core, std::string peer)
      : service_(service), core_(core), peer_(std::move(peer)) {}
  void set_weak_self(std::weak_ptr<WorkerSessionStream> self) { weak_self_ = std::move(self); }

 private:
  // The core talks to the stream through this link; it holds the stream weakly so a finished
  // stream is freed even while the core still remembers the worker.
  class Link final : public WorkerLink {
   public:
    explicit Link(std::weak_ptr<WorkerSessionStream> stream) : stream_(std::move(stream)) {}
    void Send(v1::CoordinatorToWorker message) override {
      if (auto s = stream_.lock()) s->Base::Send(std::move(message));
    }
    void Close(absl::Status status) override {
      if (auto s = stream_.lock()) s->Base::Close(rpc::ToGrpcStatus(status));
    }

   private:
    std::weak_ptr<WorkerSessionStream> stream_;
  };

  void OnRequest(const v1::WorkerMessage& message) override {
    if (worker_id_ == 0) {
      if (!message.has_hello()) {
        Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                           "the first message of a worker session must be a hello"));
        return;
      }
      if (absl::Status auth = service_->Authenticate("worker", message.hello().name(), peer_,
                                                     message.hello().join_token());
          !auth.ok()) {
        Close(rpc::ToGrpcStatus(auth));
        return;
      }
      auto link = std::make_shared<Link>(weak_self_);
      link_ = link.get();
      absl::StatusOr<int32_t> id = core_->WorkerHello(std::move(link), message.hello());
      if (!id.ok()) {
        Close(rpc::ToGrpcStatus(id.status()));
        return;
      }
      worker_id_ = *id;
      return;
    }
    core_->WorkerMessage(worker_id_, message);
  }

  void OnStreamDone() override {
    if (worker_id_ != 0) core_->WorkerGone(worker_id_, "session_closed", link_);
  }

  const CoordinatorService* const service_;
  CoordinatorCore* const core_;
  const std::string peer_;
  std::weak_ptr<WorkerSessionStream> weak_self_;
  int32_t worker_id_ = 0;             // 0 until the hello is accepted (ids start at 1)
  const WorkerLink* link_ = nullptr;  // identity only: the core owns the link
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorToWorker>*
CoordinatorService::WorkerSession(grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<WorkerSessionStream>(this, core_, context->peer());
  stream->set_weak_self(stream);
  stream->Begin(stream);
  return stream.get();
}

}  // namespace syncopate::coordinator
