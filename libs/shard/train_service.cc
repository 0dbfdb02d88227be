#include "libs/shard/train_service.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/rpc/bidi_stream.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/payload_codec.h"
#include "libs/rpc/security.h"
#include "libs/rpc/train_wire.h"
#include "libs/shard/colocated_link.h"
#include "libs/tensor/bfloat16.h"

namespace syncopate::shard {
namespace {

class TrainStream final : public rpc::BidiStream<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  TrainStream(TrainService* service, std::string peer)
      : service_(service), peer_(std::move(peer)) {}
  ~TrainStream() override {
    if (colocated_ != nullptr) colocated_->Stop();
  }
  void set_weak_self(std::weak_ptr<TrainStream> self) { weak_self_ = std::move(self); }

 private:
  void OnRequest(const grpc::ByteBuffer& bytes) override {
    v1::WorkerToShard request;
    rpc::ReceivedPayload gradient;
    if (absl::Status decoded = rpc::DecodeWithPayload(bytes, rpc::kPushGradient, request, gradient);
        !decoded.ok()) {
      Refuse(grpc::StatusCode::INVALID_ARGUMENT, RejectionReason::kMalformed,
             std::string(decoded.message()));
      return;
    }
    service_->wire().CountReceived(
        static_cast<int64_t>(bytes.Length()), static_cast<int64_t>(gradient.size()),
        request.has_pull() ? rpc::SparseBytes(request.pull().sparse())
                           : rpc::SparseBytes(request.push().sparse()) +
                                 rpc::SparseBytes(request.push().then_pull().sparse()));
    switch (request.kind_case()) {
      case v1::WorkerToShard::kHello:
        OnHello(request.hello());
        return;
      case v1::WorkerToShard::kPull:
      case v1::WorkerToShard::kPush:
        // The worker decided on the segment before its first request: if it mapped it, it
        // unlinked the name; if not, nobody will, so the name goes now.
        if (colocated_ != nullptr) colocated_->Unlink();
        if (core_ == nullptr) {
          Refuse(grpc::StatusCode::FAILED_PRECONDITION, RejectionReason::kNoHello,
                 "the first message on a Train stream must be a hello");
          return;
        }
        if (request.has_pull()) {
          OnPull(request.pull(), std::nullopt, /*box=*/false);
        } else {
          OnPush(request.push(), gradient, /*box=*/false);
        }
        return;
      default:
        Refuse(grpc::StatusCode::INVALID_ARGUMENT, RejectionReason::kEmptyMessage,
               "empty WorkerToShard message");
    }
  }

  void OnHello(const v1::TrainHello& hello) {
    if (absl::Status auth = rpc::CheckJoinToken(service_->join_token(), hello.join_token());
        !auth.ok()) {
      LOG(WARNING) << "refused Train stream of worker " << hello.worker_id() << " from " << peer_
                   << ": " << auth.message();
      Refuse(grpc::StatusCode::UNAUTHENTICATED, RejectionReason::kUnauthenticated,
             std::string(auth.message()));
      return;
    }
    if (hello.wire_version() != rpc::kTrainWireVersion) {
      LOG(WARNING) << "refused Train stream of worker " << hello.worker_id() << " from " << peer_
                   << ": wire version " << hello.wire_version();
      Refuse(grpc::StatusCode::FAILED_PRECONDITION, RejectionReason::kWireVersion,
             absl::StrCat("the worker speaks Train wire version ", hello.wire_version(),
                          ", this shard version ", rpc::kTrainWireVersion,
                          ": run workers and shards of the same release"));
      return;
    }
    std::shared_ptr<ShardCore> core = service_->core();
    if (core == nullptr) {
      Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shard has no partition assigned yet"));
      return;
    }
    // A worker of another job (a stale process, a reused address) must never push into this
    // job's parameters; its pushes would be shape-checked only by luck.
    if (!hello.job_id().empty() && hello.job_id() != core->job_id()) {
      LOG(WARNING) << "refused Train stream of worker " << hello.worker_id() << " from " << peer_
                   << ": job '" << hello.job_id() << "', this shard serves job '" << core->job_id()
                   << "'";
      Refuse(grpc::StatusCode::FAILED_PRECONDITION, RejectionReason::kWrongJob,
             "wrong job id: the worker is in job '" + hello.job_id() +
                 "', this shard serves job '" + core->job_id() + "'");
      return;
    }
    core_ = std::move(core);
    worker_id_ = hello.worker_id();
    role_ = hello.role();
    const ShardStats stats = core_->Stats();
    v1::ShardToWorker reply;
    v1::TrainHelloAck* ack = reply.mutable_hello();
    ack->set_version(stats.version);
    ack->set_mode(stats.mode);
    ack->set_flat_begin(core_->flat_begin());
    ack->set_flat_end(core_->flat_end());
    if (!service_->shared_memory_host().empty() &&
        hello.host_id() == service_->shared_memory_host()) {
      OfferColocatedLink(*ack->mutable_shared_memory());
    }
    SendCounted(rpc::Encode(reply), 0, 0);
  }

  // The co-located plane (ADR 0022): a segment with the stream's areas and mailboxes, and a
  // thread serving its request mailbox as a second way in for this stream's pulls and pushes.
  // On failure, no offer: the worker stays on the wire.
  void OfferColocatedLink(v1::SharedMemoryOffer& offer) {
    const auto dense_bytes =
        static_cast<size_t>(core_->flat_end() - core_->flat_begin()) * sizeof(float);
    if (dense_bytes == 0) return;  // an embedding-only shard: rows travel in the messages
    absl::StatusOr<std::shared_ptr<ColocatedLink>> created =
        ColocatedLink::Create(dense_bytes, /*pushes=*/role_ != v1::ROLE_EVALUATOR);
    if (!created.ok()) {
      LOG_FIRST_N(WARNING, 1) << "no shared memory for co-located workers, the wire instead: "
                              << created.status();
      return;
    }
    colocated_ = *std::move(created);
    colocated_->Describe(offer);
    std::weak_ptr<TrainStream> weak = weak_self_;
    colocated_->Serve(
        [weak](std::string_view request) {
          if (auto self = weak.lock()) self->OnMailboxRequest(request);
        },
        [weak](const absl::Status& broken) {
          if (auto self = weak.lock()) {
            self->Refuse(grpc::StatusCode::INVALID_ARGUMENT, RejectionReason::kMalformed,
                         std::string(broken.message()));
          }
        });
  }

  // A request from the mailbox: the same as from the stream, answered through the mailbox.
  void OnMailboxRequest(std::string_view bytes) {
    colocated_->Unlink();
    service_->wire().CountSharedReceived(static_cast<int64_t>(bytes.size()));
    v1::WorkerToShard request;
    if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      Refuse(grpc::StatusCode::INVALID_ARGUMENT, RejectionReason::kMalformed,
             "a mailbox request that is not a WorkerToShard");
      return;
    }
    if (request.has_pull()) {
      OnPull(request.pull(), std::nullopt, /*box=*/true);
    } else if (request.has_push()) {
      OnPush(request.push(), rpc::ReceivedPayload(), /*box=*/true);
    } else {
      Refuse(grpc::StatusCode::INVALID_ARGUMENT, RejectionReason::kEmptyMessage,
             "a mailbox request that is neither a pull nor a push");
    }
  }

  // A push's ack goes back at once, unless a pull rides on the push (PushRequest.then_pull):
  // then the pull's response carries it, one message for both. A rejected push drops its pull
  // (the worker sends both again, or gives up), so its ack goes back at once either way.
  // `box`: the request came from the mailbox, and so goes its answer.
  void OnPush(const v1::PushRequest& push, const rpc::ReceivedPayload& gradient, bool box) {
    v1::PushAck ack;
    if (push.gradient_in_segment() != 0) {
      // The core copies the bytes out of the segment before it validates them: a worker writing
      // into its area after the push cannot change what was checked.
      tensor::ByteChunks in_segment;
      const absl::Status bad =
          colocated_ == nullptr
              ? absl::InvalidArgumentError(
                    "the push's gradient is said to be in shared memory, but this stream has none")
              : colocated_->GradientChunks(push, box ? push.gradient().size() : gradient.size(),
                                           in_segment);
      if (!bad.ok()) {
        ack = core_->RejectPush(push, bad, RejectionReason::kBadSegment);
      } else {
        service_->wire().CountSharedReceived(push.gradient_in_segment());
        ack = core_->Push(worker_id_, push, in_segment);
      }
    } else if (box) {
      ack = core_->Push(worker_id_, push);  // a gradient in the mailbox's message, if any
    } else {
      ack = core_->Push(worker_id_, push, gradient.chunks());
    }
    if (ack.outcome() == v1::PUSH_REJECTED) {
      LOG_EVERY_N(WARNING, 100) << "rejected push from worker " << worker_id_ << ": "
                                << ack.message();
    } else if (push.has_then_pull()) {
      OnPull(push.then_pull(), std::move(ack), box);
      return;
    }
    v1::ShardToWorker reply;
    *reply.mutable_ack() = std::move(ack);
    Answer(std::move(reply), box);
  }

  // `push_ack`: the ack of the push this pull rode on, sent inside the pull's response.
  void OnPull(const v1::PullRequest& pull, std::optional<v1::PushAck> push_ack, bool box) {
    std::weak_ptr<TrainStream> weak = weak_self_;
    // The evaluator reads rows without creating them: evaluation must not grow the tables.
    absl::Status accepted =
        core_->Pull({this, worker_id_, role_ != v1::ROLE_EVALUATOR}, pull,
                    [weak, encoding = pull.encoding(), in_segment = pull.reply_in_segment(),
                     push_ack = std::move(push_ack), box](PullReply reply) {
                      if (auto self = weak.lock()) {
                        if (push_ack.has_value()) *reply.response.mutable_push_ack() = *push_ack;
                        self->SendPull(std::move(reply), encoding, in_segment, box);
                      }
                    });
    if (!accepted.ok()) {  // already counted by the core
      LOG_EVERY_N(WARNING, 100) << "refused pull from worker " << worker_id_ << ": "
                                << accepted.message();
      Close(rpc::ToGrpcStatus(accepted));
    }
  }

  // A pull's reply, its values encoded as the request asked: float32 referenced in place (no
  // copy), bfloat16 packed once per published copy and shared (the shard's state stays float32);
  // or, when the worker asked for it and the stream has a segment, float32 copied into the
  // segment's pull area, the message carrying only their length. May run on any thread (the
  // one that released a sync barrier).
  void SendPull(PullReply reply, v1::DenseEncoding encoding, bool in_segment, bool box) {
    if (in_segment && reply.values != nullptr && colocated_ != nullptr &&
        colocated_->WritePullValues(*reply.values)) {
      const auto bytes = static_cast<int64_t>(reply.values->size() * sizeof(float));
      reply.response.set_values_in_segment(bytes);
      reply.response.set_encoding(v1::DENSE_FLOAT32);
      service_->wire().CountSharedSent(bytes);
      v1::ShardToWorker message;
      *message.mutable_pull() = std::move(reply.response);
      Answer(std::move(message), box);
      return;
    }
    const int64_t sparse = rpc::SparseBytes(reply.response.sparse());
    grpc::Slice values;
    if (encoding == v1::DENSE_BFLOAT16 && reply.values != nullptr) {
      reply.response.set_encoding(v1::DENSE_BFLOAT16);
      // Look-ahead values are this puller's own: nobody else would share their packing.
      values = reply.response.look_ahead_updates() > 0
                   ? rpc::SliceOwning(tensor::PackBfloat16(*reply.values))
                   : rpc::SliceReferencing(service_->Bfloat16Of(reply.values));
    } else {
      values = rpc::SliceReferencing(std::move(reply.values));
    }
    const auto dense = static_cast<int64_t>(values.size());
    SendCounted(rpc::EncodeWithPayload(rpc::kPullValues, reply.response, values), dense, sparse);
    if (box) colocated_->Notice();  // a mailbox request answered on the stream
  }

  // An answer without dense values, back the way its request came: the response mailbox, or
  // the stream (also when it is too large for the mailbox, which then says so).
  void Answer(v1::ShardToWorker message, bool box) {
    if (box) {
      const std::string bytes = message.SerializeAsString();
      if (colocated_->Answer(bytes)) {
        service_->wire().CountSharedSent(static_cast<int64_t>(bytes.size()));
        return;
      }
    }
    const int64_t sparse = message.has_pull() ? rpc::SparseBytes(message.pull().sparse()) : 0;
    SendCounted(rpc::Encode(message), 0, sparse);
    if (box) colocated_->Notice();
  }

  // Send, counting the message in the service's WireBytes (`dense`, `sparse`: its payload's and
  // embedding rows' bytes).
  void SendCounted(grpc::ByteBuffer message, int64_t dense, int64_t sparse) {
    const int64_t total = static_cast<int64_t>(message.Length());
    if (Send(std::move(message))) service_->wire().CountSent(total, dense, sparse);
  }

  void Refuse(grpc::StatusCode code, RejectionReason reason, const std::string& message) {
    service_->metrics()->CountRejection(reason);
    Close(grpc::Status(code, message));
  }

  void OnStreamDone() override {
    if (colocated_ != nullptr) colocated_->Stop();  // no mailbox request after this
    if (core_ != nullptr) core_->CancelPulls(this);
  }

  TrainService* const service_;
  const std::string peer_;
  std::weak_ptr<TrainStream> weak_self_;
  // Set by OnHello, then never changed: read by the stream's gRPC callbacks, its mailbox thread
  // (started after them) and pull callbacks on any thread.
  std::shared_ptr<ShardCore> core_;
  int32_t worker_id_ = -1;
  v1::Role role_ = v1::ROLE_UNSPECIFIED;
  // The co-located plane (ADR 0022), when offered: set by OnHello before any request can arrive.
  std::shared_ptr<ColocatedLink> colocated_;
};

}  // namespace

TrainService::TrainService(ShardMetrics* metrics, std::string join_token, bool shared_memory)
    : metrics_(metrics != nullptr ? metrics : ShardMetrics::NoOp()),
      join_token_(std::move(join_token)),
      shared_memory_host_(shared_memory ? rpc::HostIdentity() : "") {
  // Segments an earlier, killed shard process left between offering and a worker's mapping.
  if (!shared_memory_host_.empty()) {
    if (const int removed = rpc::SharedSegment::RemoveStale(); removed > 0) {
      LOG(INFO) << "removed " << removed << " shared-memory segment(s) of dead processes";
    }
  }
}

std::shared_ptr<const std::string> TrainService::Bfloat16Of(
    const std::shared_ptr<const std::vector<float>>& values) {
  absl::MutexLock lock(&bfloat16_mu_);
  // lock() is null once the copy it watched is gone, so a new copy at a reused address never
  // matches.
  if (bfloat16_source_.lock() != values) {
    bfloat16_packed_ = std::make_shared<const std::string>(tensor::PackBfloat16(*values));
    bfloat16_source_ = values;
  }
  return bfloat16_packed_;
}

void TrainService::SetCore(std::shared_ptr<ShardCore> core) {
  absl::MutexLock lock(&mu_);
  core_ = std::move(core);
}

std::shared_ptr<ShardCore> TrainService::core() const {
  absl::MutexLock lock(&mu_);
  return core_;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TrainService::Train(
    grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<TrainStream>(this, context->peer());
  stream->set_weak_self(stream);
  stream->Begin(stream);
  return stream.get();
}

}  // namespace syncopate::shard
