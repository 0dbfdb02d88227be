#include "libs/worker/parameter_client.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/train_wire.h"
#include "libs/tensor/bfloat16.h"
#include "libs/tensor/packed.h"

namespace syncopate::worker {
namespace {

v1::WorkerToShard WorkerToShardPush(v1::PushRequest push) {
  v1::WorkerToShard message;
  *message.mutable_push() = std::move(push);
  return message;
}

}  // namespace

ShardConnection::ShardConnection(const v1::ShardEndpoint& endpoint, ShardConnectionOptions options,
                                 rpc::WireBytesCounter* wire)
    : endpoint_(endpoint),
      options_(std::move(options)),
      wire_(wire),
      channel_(rpc::CreateChannel(endpoint.address(), options_.security)) {}

ShardConnection::~ShardConnection() { stream_.reset(); }

absl::Status ShardConnection::Connect(absl::Duration timeout) {
  stream_.reset();
  // A new stream, a new offer: the old segment goes with the old stream.
  segment_ = rpc::SharedSegment();
  push_area_ = {};
  pull_area_ = {};
  requests_ = rpc::SegmentMailbox();
  responses_ = rpc::SegmentMailbox();
  segment_pull_ = 0;
  box_request_ = 0;
  {
    absl::MutexLock lock(&mu_);
    replies_.clear();
    ended_ = false;
    malformed_ = absl::OkStatus();
  }
  stream_ = std::make_unique<rpc::ClientStream<grpc::ByteBuffer, grpc::ByteBuffer>>(
      [this](grpc::ClientContext* context) { return rpc::OpenRawTrainStream(channel_, context); },
      [this](grpc::ByteBuffer& bytes) { OnMessage(bytes); },
      [this](const grpc::Status& status) { OnEnd(status); });
  v1::WorkerToShard hello;
  hello.mutable_hello()->set_worker_id(options_.worker_id);
  hello.mutable_hello()->set_role(options_.role);
  hello.mutable_hello()->set_join_token(options_.join_token);
  hello.mutable_hello()->set_job_id(options_.job_id);
  hello.mutable_hello()->set_wire_version(rpc::kTrainWireVersion);
  if (options_.shared_memory) hello.mutable_hello()->set_host_id(rpc::HostIdentity());
  if (!Write(rpc::Encode(hello), 0, 0)) {
    stream_->WaitForEnd(timeout);
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), " at ",
                                               endpoint_.address(), " is unreachable"));
  }
  absl::StatusOr<ShardReply> ack = WaitReply(0, timeout);
  if (!ack.ok()) return ack.status();
  if (ack->message.hello().has_shared_memory()) TakeOffer(ack->message.hello());
  return absl::OkStatus();
}

void ShardConnection::TakeOffer(const v1::TrainHelloAck& ack) {
  const v1::SharedMemoryOffer& offer = ack.shared_memory();
  const auto payload =
      static_cast<int64_t>(offer.size()) - static_cast<int64_t>(rpc::SharedSegment::kHeaderBytes);
  const auto dense_bytes =
      static_cast<int64_t>((ack.flat_end() - ack.flat_begin()) * sizeof(float));
  // The areas must lie inside the segment, and the pull area hold the shard's whole slice.
  if (offer.push_offset() < 0 || offer.push_capacity() < 0 || offer.pull_offset() < 0 ||
      offer.push_offset() + offer.push_capacity() > payload ||
      offer.pull_offset() + offer.pull_capacity() > payload ||
      offer.pull_capacity() < dense_bytes) {
    LOG_FIRST_N(WARNING, 1) << "shard " << endpoint_.shard_id()
                            << " offered shared memory with areas outside its segment: the wire";
    return;
  }
  absl::StatusOr<rpc::SharedSegment> opened =
      rpc::SharedSegment::Open(offer.name(), static_cast<size_t>(offer.size()), offer.nonce());
  if (!opened.ok()) {
    // Another host or container that shares the kernel and IPC namespace but not /dev/shm:
    // nothing is wrong, the wire carries the payloads.
    LOG_FIRST_N(INFO, 1) << "shard " << endpoint_.shard_id()
                         << ": shared memory offered, not mapped (" << opened.status().message()
                         << "): the wire";
    return;
  }
  segment_ = *std::move(opened);
  const std::span<char> area = segment_.payload();
  push_area_ = area.subspan(static_cast<size_t>(offer.push_offset()),
                            static_cast<size_t>(offer.push_capacity()));
  pull_area_ = area.subspan(static_cast<size_t>(offer.pull_offset()),
                            static_cast<size_t>(offer.pull_capacity()));
  const int64_t box =
      static_cast<int64_t>(rpc::SegmentMailbox::kHeaderBytes) + offer.box_capacity();
  if (offer.box_capacity() > 0 && offer.request_box_offset() >= 0 &&
      offer.response_box_offset() >= 0 && offer.request_box_offset() + box <= payload &&
      offer.response_box_offset() + box <= payload) {
    requests_ = rpc::SegmentMailbox(
        area.subspan(static_cast<size_t>(offer.request_box_offset()), static_cast<size_t>(box)));
    responses_ = rpc::SegmentMailbox(
        area.subspan(static_cast<size_t>(offer.response_box_offset()), static_cast<size_t>(box)));
    responses_seen_ = responses_.sequence();
  }
  LOG_FIRST_N(INFO, 1) << "shard " << endpoint_.shard_id()
                       << ": dense payloads through shared memory (co-located)";
}

bool ShardConnection::Write(const grpc::ByteBuffer& message, int64_t dense, int64_t sparse) {
  if (stream_ == nullptr || !stream_->Write(message)) return false;
  if (wire_ != nullptr) wire_->CountSent(static_cast<int64_t>(message.Length()), dense, sparse);
  return true;
}

void ShardConnection::OnMessage(grpc::ByteBuffer& bytes) {
  ShardReply reply;
  if (absl::Status decoded =
          rpc::DecodeWithPayload(bytes, rpc::kPullValues, reply.message, reply.values);
      !decoded.ok()) {
    // As gRPC's protobuf codec treats a reply it cannot parse: the stream is done for, INTERNAL
    // (retried: the worker reconnects, which cancels this stream). Not cancelled from here:
    // this is the stream's own reader thread, and Connect() may be replacing `stream_`.
    Malformed(absl::StrCat("sent a reply that does not parse: ", decoded.message()));
    return;
  }
  if (wire_ != nullptr) {
    wire_->CountReceived(
        static_cast<int64_t>(bytes.Length()), static_cast<int64_t>(reply.values.size()),
        reply.message.has_pull() ? rpc::SparseBytes(reply.message.pull().sparse()) : 0);
  }
  File(std::move(reply));
}

void ShardConnection::Malformed(const std::string& what) {
  absl::MutexLock lock(&mu_);
  malformed_ = absl::InternalError(absl::StrCat("shard ", endpoint_.shard_id(), " ", what));
}

void ShardConnection::File(ShardReply reply) {
  if (reply.message.has_pull() && reply.message.pull().values_in_segment() != 0) {
    const int64_t bytes = reply.message.pull().values_in_segment();
    if (bytes < 0 || static_cast<size_t>(bytes) > pull_area_.size() || reply.values.size() != 0 ||
        !reply.message.pull().values().empty()) {
      Malformed(absl::StrCat("answered ", bytes, " bytes in a shared-memory area of ",
                             pull_area_.size()));
      return;
    }
    reply.values_in_segment = pull_area_.subspan(0, static_cast<size_t>(bytes));
    if (wire_ != nullptr) wire_->CountSharedReceived(bytes);
  }
  int64_t id = 0;  // the hello ack has no request id
  if (reply.message.has_pull()) id = reply.message.pull().request_id();
  if (reply.message.has_ack()) id = reply.message.ack().request_id();
  // A pull that rode on a push answers both: its ack is filed under the push's id.
  std::optional<ShardReply> ack;
  if (reply.message.has_pull() && reply.message.pull().has_push_ack()) {
    ack.emplace();
    *ack->message.mutable_ack() = std::move(*reply.message.mutable_pull()->mutable_push_ack());
    reply.message.mutable_pull()->clear_push_ack();
  }
  absl::MutexLock lock(&mu_);
  if (ack.has_value()) {
    // The id first: bugprone-use-after-move does not see that the move happens in operator=.
    const int64_t push_id = ack->message.ack().request_id();
    replies_[push_id] = *std::move(ack);
  }
  replies_[id] = std::move(reply);
}

bool ShardConnection::Post(const v1::WorkerToShard& message, int64_t request_id) {
  if (!requests_.valid() || box_request_ != 0) return false;
  const std::string bytes = message.SerializeAsString();
  if (!requests_.Post(bytes).ok()) return false;  // too large: the stream carries it
  box_request_ = request_id;
  if (wire_ != nullptr) wire_->CountSharedSent(static_cast<int64_t>(bytes.size()));
  return true;
}

absl::Status ShardConnection::TakeBoxAnswer(absl::Duration timeout) {
  std::string bytes;
  const absl::Status taken = responses_.Take(responses_seen_, bytes, timeout);
  if (absl::IsDeadlineExceeded(taken)) return taken;
  box_request_ = 0;
  if (!taken.ok()) {
    Malformed(std::string(taken.message()));
    return absl::OkStatus();  // the wait sees malformed_
  }
  if (bytes.empty()) return absl::OkStatus();  // answered on the stream: wait there
  if (wire_ != nullptr) wire_->CountSharedReceived(static_cast<int64_t>(bytes.size()));
  ShardReply reply;
  if (!reply.message.ParseFromString(bytes)) {
    Malformed("put an answer that does not parse in its mailbox");
    return absl::OkStatus();
  }
  File(std::move(reply));
  return absl::OkStatus();
}

void ShardConnection::OnEnd(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  end_status_ = status;
}

bool ShardConnection::broken() const {
  absl::MutexLock lock(&mu_);
  return stream_ == nullptr || ended_ || !malformed_.ok();
}

v1::PullRequest ShardConnection::NewPull(int64_t min_version, std::vector<v1::SparseRows> sparse,
                                         std::optional<EvalPointRead> read) {
  v1::PullRequest pull;
  pull.set_request_id(next_request_id_++);
  pull.set_min_version(min_version);
  if (read.has_value()) {
    pull.set_eval_point(std::max<int64_t>(1, read->point));
    pull.set_release_point(read->release);
    pull.set_keep_point(read->release && read->keep);
  }
  pull.set_encoding(options_.dense_encoding);
  for (v1::SparseRows& rows : sparse) *pull.add_sparse() = std::move(rows);
  if (!pull_area_.empty() && segment_pull_ == 0) {
    pull.set_reply_in_segment(true);
    segment_pull_ = pull.request_id();
  }
  return pull;
}

absl::StatusOr<int64_t> ShardConnection::SendPull(int64_t min_version,
                                                  std::vector<v1::SparseRows> sparse,
                                                  std::optional<EvalPointRead> read) {
  v1::WorkerToShard message;
  *message.mutable_pull() = NewPull(min_version, std::move(sparse), read);
  if (Post(message, message.pull().request_id())) return message.pull().request_id();
  if (!Write(rpc::Encode(message), 0, rpc::SparseBytes(message.pull().sparse()))) {
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), ": stream broken"));
  }
  return message.pull().request_id();
}

absl::StatusOr<ShardConnection::PushAndPullIds> ShardConnection::SendPush(
    int64_t token, int64_t samples, std::string_view gradient, std::vector<v1::SparseRows> sparse,
    std::optional<ThenPull> then_pull) {
  v1::PushRequest push;
  PushAndPullIds ids;
  ids.push = next_request_id_++;
  push.set_request_id(ids.push);
  push.set_token(token);
  push.set_samples(samples);
  push.set_encoding(options_.dense_encoding);
  for (v1::SparseRows& rows : sparse) *push.add_sparse() = std::move(rows);
  if (then_pull.has_value()) {
    *push.mutable_then_pull() =
        NewPull(then_pull->min_version, std::move(then_pull->sparse), std::nullopt);
    ids.pull = push.then_pull().request_id();
  }
  const int64_t sparse_bytes =
      rpc::SparseBytes(push.sparse()) + rpc::SparseBytes(push.then_pull().sparse());
  bool written = false;
  if (!gradient.empty() && gradient.size() <= push_area_.size()) {
    // The co-located plane: the bytes into the push area (the shard copies them out before it
    // acks), the message without them. ParameterClient encodes these float32.
    std::memcpy(push_area_.data(), gradient.data(), gradient.size());
    push.set_gradient_in_segment(static_cast<int64_t>(gradient.size()));
    push.set_encoding(v1::DENSE_FLOAT32);
    const v1::WorkerToShard message = WorkerToShardPush(std::move(push));
    written = Post(message, ids.push) || Write(rpc::Encode(message), 0, sparse_bytes);
    if (written && wire_ != nullptr) wire_->CountSharedSent(static_cast<int64_t>(gradient.size()));
  } else {
    written = Write(rpc::EncodeWithPayload(rpc::kPushGradient, push,
                                           rpc::SliceCopying({gradient.data(), gradient.size()})),
                    static_cast<int64_t>(gradient.size()), sparse_bytes);
  }
  if (!written) {
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), ": stream broken"));
  }
  return ids;
}

absl::StatusOr<ShardReply> ShardConnection::WaitReply(int64_t request_id, absl::Duration timeout,
                                                      const std::function<bool()>& abort) {
  // How often a long wait (a sync barrier) checks whether it should give up early.
  constexpr absl::Duration kAbortPoll = absl::Milliseconds(200);
  const absl::Time deadline = absl::Now() + timeout;
  // A request in the mailbox is answered there (or there says "on the stream"): the answer is
  // taken by this thread itself, the shard's wake-up straight to it.
  while (box_request_ != 0) {
    {
      absl::MutexLock lock(&mu_);
      if (replies_.contains(request_id) || ended_ || !malformed_.ok()) break;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("shard ", endpoint_.shard_id(),
                                                      " did not answer within ",
                                                      absl::FormatDuration(timeout)));
    }
    if (absl::IsDeadlineExceeded(TakeBoxAnswer(std::min(kAbortPoll, left))) && abort && abort()) {
      return absl::CancelledError("wait abandoned: stopping");
    }
  }
  absl::MutexLock lock(&mu_);
  auto arrived = [this, request_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return replies_.contains(request_id) || ended_ || !malformed_.ok();
  };
  while (!mu_.AwaitWithTimeout(absl::Condition(&arrived),
                               std::min(kAbortPoll, deadline - absl::Now()))) {
    if (abort && abort()) return absl::CancelledError("wait abandoned: stopping");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("shard ", endpoint_.shard_id(),
                                                      " did not answer within ",
                                                      absl::FormatDuration(timeout)));
    }
  }
  auto it = replies_.find(request_id);
  if (it == replies_.end() && !malformed_.ok()) return malformed_;
  if (it == replies_.end()) {
    // A refusal retrying cannot fix (wrong join token, another job's shard, a request the shard
    // can never accept) keeps its code so the worker ends; anything else is UNAVAILABLE, which
    // makes the worker reconnect (rpc::IsRetryable says which is which).
    if (rpc::IsPermanentError(end_status_)) {
      return absl::Status(static_cast<absl::StatusCode>(end_status_.error_code()),
                          absl::StrCat("shard ", endpoint_.shard_id(),
                                       " refused us: ", end_status_.error_message()));
    }
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(),
                                               " stream ended: ", end_status_.error_message()));
  }
  ShardReply reply = std::move(it->second);
  replies_.erase(it);
  // Its values are read before the next pull is sent (CollectPulls): the area may be used again.
  if (request_id == segment_pull_) segment_pull_ = 0;
  return reply;
}

ParameterClient::ParameterClient(const v1::ShardMap& map, ParameterClientOptions options)
    : options_(std::move(options)),
      map_(map),
      abort_(options_.abort),
      tokens_(map.shards_size(), 0),
      min_versions_(map.shards_size(), 0),
      modes_(map.shards_size(), v1::MODE_UNSPECIFIED),
      residuals_(map.shards_size()),
      routing_(map.shards_size(), options_.table_dims) {
  for (const v1::ShardEndpoint& endpoint : map.shards()) {
    shards_.push_back(std::make_unique<ShardConnection>(endpoint, options_.connection, &wire_));
  }
}

bool ParameterClient::WaitForMembership() {
  if (options_.wait) return options_.wait(options_.membership_race_wait);
  absl::SleepFor(options_.membership_race_wait);
  return false;
}

absl::Status ParameterClient::Connect(absl::Duration timeout) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (!shards_[s]->broken()) continue;
    absl::Status status = shards_[s]->Connect(timeout);
    if (!status.ok()) return status;
    // The shard may have restarted from a checkpoint at an older version: never wait for a
    // version of its previous life; the next pull refreshes the token.
    min_versions_[s] = 0;
  }
  return absl::OkStatus();
}

absl::Status ParameterClient::RoutePull(const TableKeys* keys, const TableRows* rows) {
  if (keys != nullptr && !keys->empty() && rows == nullptr) {
    return absl::InvalidArgumentError("a pull of rows needs somewhere to put them");
  }
  // Route every key to its owner; the routing remembers where each came from, for the rows and
  // the push.
  return routing_.Route(keys);
}

absl::StatusOr<std::vector<int64_t>> ParameterClient::SendPulls(const TableKeys* keys,
                                                                TableRows* rows, bool newest,
                                                                std::optional<EvalPointRead> read) {
  SYNCOPATE_RETURN_IF_ERROR(RoutePull(keys, rows));
  std::vector<int64_t> ids(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    absl::StatusOr<int64_t> id = shards_[s]->SendPull(
        newest ? 0 : min_versions_[s], routing_.Requests(static_cast<int32_t>(s)), read);
    if (!id.ok()) return id.status();
    ids[s] = *id;
  }
  if (rows != nullptr) routing_.ShapeRows(*rows);
  return ids;
}

absl::StatusOr<PullStats> ParameterClient::CollectPulls(const std::vector<int64_t>& ids,
                                                        std::span<float> params,
                                                        absl::Duration timeout, TableRows* rows,
                                                        bool point_read) {
  PullStats stats;
  for (size_t s = 0; s < shards_.size(); ++s) {
    absl::StatusOr<ShardReply> reply = shards_[s]->WaitReply(ids[s], timeout, abort_);
    if (!reply.ok()) return reply.status();
    const v1::PullResponse& pull = reply->message.pull();
    stats.eval_points.push_back(pull.eval_point());
    stats.point_age_seconds.push_back(pull.point_age_seconds());
    stats.point_examples.push_back(pull.point_examples());
    stats.versions.push_back(pull.version());
    stats.modes.push_back(pull.mode());
    // An evaluation point's read that found none: nothing to unpack.
    if (point_read && pull.eval_point() == 0) continue;
    const v1::ShardEndpoint& endpoint = shards_[s]->endpoint();
    const std::span<float> slice =
        params.subspan(endpoint.flat_begin(), endpoint.flat_end() - endpoint.flat_begin());
    absl::Status unpacked =
        !reply->values_in_segment.empty()
            ? tensor::UnpackFloatsInto(std::string_view(reply->values_in_segment.data(),
                                                        reply->values_in_segment.size()),
                                       slice)
        : pull.encoding() == v1::DENSE_BFLOAT16
            ? tensor::UnpackBfloat16Into(reply->values.chunks(), slice)
            : tensor::UnpackFloatsInto(reply->values.chunks(), slice);
    if (!unpacked.ok()) return unpacked;
    if (rows != nullptr) {
      SYNCOPATE_RETURN_IF_ERROR(
          routing_.ScatterRows(static_cast<int32_t>(s), pull.sparse(), *rows));
    } else if (pull.sparse_size() != 0) {
      return absl::DataLossError(absl::StrCat("shard ", s, " answered rows nobody asked for"));
    }
    if (point_read) continue;  // a read of the past is not the next push's token
    tokens_[s] = pull.version();
    modes_[s] = pull.mode();
    stats.held_seconds = std::max(stats.held_seconds, pull.held_seconds());
  }
  return stats;
}

absl::StatusOr<PullStats> ParameterClient::PullAll(std::span<float> params, absl::Duration timeout,
                                                   bool newest, const TableKeys* keys,
                                                   TableRows* rows) {
  absl::StatusOr<std::vector<int64_t>> ids = SendPulls(keys, rows, newest);
  if (!ids.ok()) return ids.status();
  return CollectPulls(*ids, params, timeout, rows, /*point_read=*/false);
}

absl::StatusOr<PullStats> ParameterClient::PullEvalPoint(const EvalPointRead& read,
                                                         std::span<float> params,
                                                         absl::Duration timeout,
                                                         const TableKeys* keys, TableRows* rows) {
  absl::StatusOr<std::vector<int64_t>> ids = SendPulls(keys, rows, /*newest=*/true, read);
  if (!ids.ok()) return ids.status();
  return CollectPulls(*ids, params, timeout, rows, /*point_read=*/true);
}

absl::StatusOr<PushStats> ParameterClient::PushAll(std::span<const float> gradient, int64_t samples,
                                                   absl::Duration timeout,
                                                   const TableRows* row_grads) {
  return Push(gradient, samples, timeout, row_grads, nullptr);
}

absl::StatusOr<PushStats> ParameterClient::PushAllThenPull(std::span<const float> gradient,
                                                           int64_t samples, absl::Duration timeout,
                                                           const TableRows* row_grads,
                                                           const NextPull& next) {
  return Push(gradient, samples, timeout, row_grads, &next);
}

std::vector<std::string_view> ParameterClient::EncodeDense(std::span<const float> gradient,
                                                           std::vector<std::string>& encoded) {
  encoded.assign(shards_.size(), std::string());
  std::vector<std::string_view> dense(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    const v1::ShardEndpoint& endpoint = shards_[s]->endpoint();
    const std::span<const float> slice =
        gradient.subspan(endpoint.flat_begin(), endpoint.flat_end() - endpoint.flat_begin());
    // A co-located shard takes float32 through shared memory: rounding would save no bytes.
    if (options_.connection.dense_encoding == v1::DENSE_BFLOAT16 &&
        !shards_[s]->pushes_in_segment()) {
      residuals_[s].resize(slice.size(), 0.0f);
      encoded[s] = tensor::PackBfloat16(slice, residuals_[s]);
      dense[s] = encoded[s];
    } else {
      dense[s] = tensor::PackedView(slice);
    }
  }
  return dense;
}

absl::StatusOr<PushStats> ParameterClient::Push(std::span<const float> gradient, int64_t samples,
                                                absl::Duration timeout, const TableRows* row_grads,
                                                const NextPull* next) {
  const absl::Time start = absl::Now();
  // Each shard's rows, split before anything is sent: a gradient of the wrong shape is refused
  // whole, never pushed to some shards only.
  const TableRows none;
  std::vector<std::vector<v1::SparseRows>> sparse(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    SYNCOPATE_RETURN_IF_ERROR(routing_.SplitGradients(
        static_cast<int32_t>(s), row_grads == nullptr ? none : *row_grads, sparse[s]));
  }
  // Each shard's dense bytes, encoded once: a push sent again (the membership race) is the same
  // push, and error feedback must not count its rounding twice.
  std::vector<std::string> encoded;
  const std::vector<std::string_view> dense = EncodeDense(gradient, encoded);
  // The next pull rides on each push (PushAllThenPull): routed now, after the gradients were
  // split by the last pull's routing; in sync it waits for the barrier this gradient belongs to.
  std::vector<int64_t> pull_ids(shards_.size(), 0);
  if (next != nullptr) {
    SYNCOPATE_RETURN_IF_ERROR(RoutePull(next->keys, next->rows));
    for (size_t s = 0; s < shards_.size(); ++s) {
      min_versions_[s] = NextPullMinVersion(modes_[s], tokens_[s]);
    }
  }
  PushStats stats;
  std::vector<size_t> pending(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) pending[s] = s;
  // The membership race (ParameterClientOptions): FAILED_PRECONDITION is retried briefly.
  for (int attempt = 0; !pending.empty(); ++attempt) {
    std::vector<std::pair<size_t, int64_t>> ids;
    for (size_t s : pending) {
      std::optional<ShardConnection::ThenPull> then_pull;
      if (next != nullptr) {
        then_pull =
            ShardConnection::ThenPull{min_versions_[s], routing_.Requests(static_cast<int32_t>(s))};
      }
      absl::StatusOr<ShardConnection::PushAndPullIds> sent =
          shards_[s]->SendPush(tokens_[s], samples, dense[s], sparse[s], std::move(then_pull));
      if (!sent.ok()) return sent.status();
      ids.emplace_back(s, sent->push);
      pull_ids[s] = sent->pull;
    }
    pending.clear();
    for (auto [s, id] : ids) {
      absl::StatusOr<ShardReply> reply = shards_[s]->WaitReply(id, timeout, abort_);
      if (!reply.ok()) return reply.status();
      const v1::PushAck& ack = reply->message.ack();
      switch (ack.outcome()) {
        case v1::PUSH_APPLIED:
          ++stats.applied;
          break;
        case v1::PUSH_DECAYED:
          ++stats.decayed;
          break;
        case v1::PUSH_DROPPED:
          ++stats.dropped;
          break;
        default:
          // The shard dropped the pull that rode on this push.
          if (ack.code() == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION) &&
              attempt < options_.membership_race_retries) {
            pending.push_back(s);  // sent again with its pull
            continue;
          }
          ++stats.rejected;
          stats.rejections.push_back(ack);
          if (next != nullptr) {
            absl::StatusOr<int64_t> pull =
                shards_[s]->SendPull(min_versions_[s], routing_.Requests(static_cast<int32_t>(s)));
            if (!pull.ok()) return pull.status();
            pull_ids[s] = *pull;
          }
          break;
      }
      // Sync: the next pull waits for the barrier this gradient belongs to.
      min_versions_[s] = NextPullMinVersion(modes_[s], tokens_[s]);
    }
    if (!pending.empty() && WaitForMembership()) {
      return absl::CancelledError("stopped while a shard was learning of this worker");
    }
  }
  stats.ack_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (next != nullptr) {
    if (next->rows != nullptr) routing_.ShapeRows(*next->rows);
    *next->pulled = CollectPulls(pull_ids, next->params, timeout, next->rows,
                                 /*point_read=*/false);
    // The acks came inside the pulls' responses, after the shards held them (the sync barrier):
    // that wait is the pull's (PullStats.held_seconds), not the push's.
    if (next->pulled->ok()) {
      stats.ack_seconds = std::max(0.0, stats.ack_seconds - (*next->pulled)->held_seconds);
    }
  }
  return stats;
}

}  // namespace syncopate::worker
