// Coordinator.ShardSession: hello -> assignment, then reports up and commands down.
#include "libs/rpc/bidi_stream.h"
#include "libs/rpc/grpc_util.h"
#include "services/coordinator/coordinator_service.h"

namespace syncopate::coordinator {
namespace {

class ShardSessionStream final : public rpc::BidiStream<v1::ShardMessage, v1::CoordinatorToShard> {
 public:
  using Base = rpc::BidiStream<v1::ShardMessage, v1::CoordinatorToShard>;
  explicit ShardSessionStream(CoordinatorCore* core) : core_(core) {}
  void set_weak_self(std::weak_ptr<ShardSessionStream> self) { weak_self_ = std::move(self); }

 private:
  class Link final : public ShardLink {
   public:
    explicit Link(std::weak_ptr<ShardSessionStream> stream) : stream_(std::move(stream)) {}
    void Send(v1::CoordinatorToShard message) override {
      if (auto s = stream_.lock()) s->Base::Send(std::move(message));
    }
    void Close(absl::Status status) override {
      if (auto s = stream_.lock()) s->Base::Close(rpc::ToGrpcStatus(status));
    }

   private:
    std::weak_ptr<ShardSessionStream> stream_;
  };

  void OnRequest(const v1::ShardMessage& message) override {
    if (shard_id_ < 0) {
      if (!message.has_hello()) {
        Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                           "the first message of a shard session must be a hello"));
        return;
      }
      absl::Status status = core_->ShardHello(std::make_shared<Link>(weak_self_), message.hello());
      if (!status.ok()) {
        Close(rpc::ToGrpcStatus(status));
        return;
      }
      shard_id_ = message.hello().shard_id();
      return;
    }
    if (message.has_report()) core_->ShardReport(shard_id_, message.report());
  }

  void OnStreamDone() override {
    if (shard_id_ >= 0) core_->ShardGone(shard_id_);
  }

  CoordinatorCore* const core_;
  std::weak_ptr<ShardSessionStream> weak_self_;
  int32_t shard_id_ = -1;
};

}  // namespace

grpc::ServerBidiReactor<v1::ShardMessage, v1::CoordinatorToShard>* CoordinatorService::ShardSession(
    grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<ShardSessionStream>(core_);
  stream->set_weak_self(stream);
  stream->Begin(stream);
  return stream.get();
}

}  // namespace syncopate::coordinator
