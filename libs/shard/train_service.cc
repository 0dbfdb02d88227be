#include "libs/shard/train_service.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/rpc/bidi_stream.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/payload_codec.h"
#include "libs/rpc/security.h"
#include "libs/rpc/shared_segment.h"
#include "libs/rpc/train_wire.h"
#include "libs/tensor/bfloat16.h"

namespace syncopate::shard {
namespace {

class TrainStream final : public rpc::BidiStream<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  TrainStream(TrainService* service, std::string peer)
      : service_(service), peer_(std::move(peer)) {}
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
        segment_.Unlink();
        if (core_ == nullptr) {
          Refuse(grpc::StatusCode::FAILED_PRECONDITION, RejectionReason::kNoHello,
                 "the first message on a Train stream must be a hello");
          return;
        }
        if (request.has_pull()) {
          OnPull(request.pull(), std::nullopt);
        } else {
          OnPush(request.push(), gradient);
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
      OfferSegment(*ack->mutable_shared_memory());
    }
    SendCounted(rpc::Encode(reply), 0, 0);
  }

  // The co-located plane (ADR 0022): a segment with a push area (none for the evaluator, which
  // never pushes) and a pull area, each one dense slice of float32. On failure, no offer: the
  // worker stays on the wire.
  void OfferSegment(v1::SharedMemoryOffer& offer) {
    const auto dense_bytes =
        static_cast<size_t>(core_->flat_end() - core_->flat_begin()) * sizeof(float);
    if (dense_bytes == 0) return;  // an embedding-only shard: rows travel in the messages
    const size_t push_capacity = role_ == v1::ROLE_EVALUATOR ? 0 : dense_bytes;
    constexpr size_t kCacheLine = 64;  // the pull area starts on its own line
    const size_t pull_offset = (push_capacity + kCacheLine - 1) / kCacheLine * kCacheLine;
    absl::StatusOr<rpc::SharedSegment> created =
        rpc::SharedSegment::Create(pull_offset + dense_bytes);
    if (!created.ok()) {
      LOG_FIRST_N(WARNING, 1) << "no shared memory for co-located workers, the wire instead: "
                              << created.status();
      return;
    }
    segment_ = *std::move(created);
    push_area_ = segment_.payload().subspan(0, push_capacity);
    pull_area_ = segment_.payload().subspan(pull_offset, dense_bytes);
    offer.set_name(segment_.name());
    offer.set_nonce(segment_.nonce());
    offer.set_size(static_cast<int64_t>(segment_.size()));
    offer.set_push_offset(0);
    offer.set_push_capacity(static_cast<int64_t>(push_capacity));
    offer.set_pull_offset(static_cast<int64_t>(pull_offset));
    offer.set_pull_capacity(static_cast<int64_t>(dense_bytes));
  }

  // The dense gradient of a push that says it is in the segment: its bytes in the push area, or
  // why the push is refused (INVALID_ARGUMENT, never FAILED_PRECONDITION: a worker retries that
  // as the membership race).
  absl::Status GradientInSegment(const v1::PushRequest& push,
                                 const rpc::ReceivedPayload& inline_gradient,
                                 tensor::ByteChunks& chunks) const {
    const int64_t bytes = push.gradient_in_segment();
    if (push_area_.empty()) {
      return absl::InvalidArgumentError(
          "the push's gradient is said to be in shared memory, but this stream has none");
    }
    if (bytes < 0 || static_cast<size_t>(bytes) > push_area_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the push's gradient is said to be ", bytes,
                                                     " bytes of shared memory; its area holds ",
                                                     push_area_.size()));
    }
    if (inline_gradient.size() != 0 || push.encoding() != v1::DENSE_FLOAT32) {
      return absl::InvalidArgumentError(
          "a gradient in shared memory is float32 and has no bytes in the message");
    }
    chunks = {{push_area_.data(), static_cast<size_t>(bytes)}};
    return absl::OkStatus();
  }

  // A push's ack goes back at once, unless a pull rides on the push (PushRequest.then_pull):
  // then the pull's response carries it, one message for both. A rejected push drops its pull
  // (the worker sends both again, or gives up), so its ack goes back at once either way.
  void OnPush(const v1::PushRequest& push, const rpc::ReceivedPayload& gradient) {
    v1::PushAck ack;
    if (push.gradient_in_segment() != 0) {
      // The core copies the bytes out of the segment before it validates them: a worker writing
      // into its area after the push cannot change what was checked.
      tensor::ByteChunks in_segment;
      if (absl::Status bad = GradientInSegment(push, gradient, in_segment); !bad.ok()) {
        ack = core_->RejectPush(push, bad, RejectionReason::kBadSegment);
      } else {
        service_->wire().CountSharedReceived(push.gradient_in_segment());
        ack = core_->Push(worker_id_, push, in_segment);
      }
    } else {
      ack = core_->Push(worker_id_, push, gradient.chunks());
    }
    if (ack.outcome() == v1::PUSH_REJECTED) {
      LOG_EVERY_N(WARNING, 100) << "rejected push from worker " << worker_id_ << ": "
                                << ack.message();
    } else if (push.has_then_pull()) {
      OnPull(push.then_pull(), std::move(ack));
      return;
    }
    v1::ShardToWorker reply;
    *reply.mutable_ack() = std::move(ack);
    SendCounted(rpc::Encode(reply), 0, 0);
  }

  // `push_ack`: the ack of the push this pull rode on, sent inside the pull's response.
  void OnPull(const v1::PullRequest& pull, std::optional<v1::PushAck> push_ack) {
    std::weak_ptr<TrainStream> weak = weak_self_;
    // The evaluator reads rows without creating them: evaluation must not grow the tables.
    absl::Status accepted =
        core_->Pull({this, worker_id_, role_ != v1::ROLE_EVALUATOR}, pull,
                    [weak, encoding = pull.encoding(), in_segment = pull.reply_in_segment(),
                     push_ack = std::move(push_ack)](PullReply reply) {
                      if (auto self = weak.lock()) {
                        if (push_ack.has_value()) *reply.response.mutable_push_ack() = *push_ack;
                        self->SendPull(std::move(reply), encoding, in_segment);
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
  void SendPull(PullReply reply, v1::DenseEncoding encoding, bool in_segment) {
    const int64_t sparse = rpc::SparseBytes(reply.response.sparse());
    if (in_segment && reply.values != nullptr && !pull_area_.empty() &&
        reply.values->size() * sizeof(float) <= pull_area_.size()) {
      const size_t bytes = reply.values->size() * sizeof(float);
      {
        absl::MutexLock lock(&pull_area_mu_);
        std::memcpy(pull_area_.data(), reply.values->data(), bytes);
      }
      reply.response.set_values_in_segment(static_cast<int64_t>(bytes));
      reply.response.set_encoding(v1::DENSE_FLOAT32);
      service_->wire().CountSharedSent(static_cast<int64_t>(bytes));
      v1::ShardToWorker message;
      *message.mutable_pull() = std::move(reply.response);
      SendCounted(rpc::Encode(message), 0, sparse);
      return;
    }
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
    if (core_ != nullptr) core_->CancelPulls(this);
  }

  TrainService* const service_;
  const std::string peer_;
  std::weak_ptr<TrainStream> weak_self_;
  std::shared_ptr<ShardCore> core_;  // only touched from OnRequest/OnStreamDone (serialised)
  int32_t worker_id_ = -1;
  v1::Role role_ = v1::ROLE_UNSPECIFIED;
  // The co-located plane's segment and its two areas: set by OnHello, before any pull can be
  // answered (so before SendPull runs on another thread), then never changed. Two pulls of one
  // worker outstanding at once (never sent by ParameterClient) would only race on its own area;
  // the mutex keeps even that from being a data race here.
  rpc::SharedSegment segment_;
  std::span<char> push_area_;
  std::span<char> pull_area_;
  absl::Mutex pull_area_mu_;
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
