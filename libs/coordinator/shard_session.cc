// Coordinator.ShardSession: hello -> assignment, then reports up and commands down.
#include "absl/strings/str_cat.h"
#include "libs/coordinator/coordinator_service.h"
#include "libs/rpc/bidi_stream.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::coordinator {
namespace {

class ShardSessionStream final : public rpc::BidiStream<v1::ShardMessage, v1::CoordinatorToShard> {
 public:
  using Base = rpc::BidiStream<v1::ShardMessage, v1::CoordinatorToShard>;
  ShardSessionStream(const CoordinatorService* service, CoordinatorCore* core, std::string peer)
      : service_(service), core_(core), peer_(std::move(peer)) {}
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
      if (absl::Status auth =
              service_->Authenticate("shard", absl::StrCat(message.hello().shard_id()), peer_,
                                     message.hello().join_token());
          !auth.ok()) {
        Close(rpc::ToGrpcStatus(auth));
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

  const CoordinatorService* const service_;
  CoordinatorCore* const core_;
  const std::string peer_;
  std::weak_ptr<ShardSessionStream> weak_self_;
  int32_t shard_id_ = -1;
};

}  // namespace

grpc::ServerBidiReactor<v1::ShardMessage, v1::CoordinatorToShard>* CoordinatorService::ShardSession(
    grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<ShardSessionStream>(this, core_, context->peer());
  stream->set_weak_self(stream);
  stream->Begin(stream);
  return stream.get();
}

}  // namespace syncopate::coordinator
