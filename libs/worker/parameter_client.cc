#include "libs/worker/parameter_client.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/train_wire.h"
#include "libs/tensor/bfloat16.h"
#include "libs/tensor/packed.h"

namespace syncopate::worker {

ShardConnection::ShardConnection(const v1::ShardEndpoint& endpoint, ShardConnectionOptions options,
                                 rpc::WireBytesCounter* wire)
    : endpoint_(endpoint),
      options_(std::move(options)),
      wire_(wire),
      channel_(rpc::CreateChannel(endpoint.address(), options_.security)) {}

ShardConnection::~ShardConnection() { stream_.reset(); }

absl::Status ShardConnection::Connect(absl::Duration timeout) {
  stream_.reset();
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
  if (!Write(rpc::Encode(hello), 0, 0)) {
    stream_->WaitForEnd(timeout);
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), " at ",
                                               endpoint_.address(), " is unreachable"));
  }
  absl::StatusOr<ShardReply> ack = WaitReply(0, timeout);
  if (!ack.ok()) return ack.status();
  return absl::OkStatus();
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
    absl::MutexLock lock(&mu_);
    malformed_ = absl::InternalError(absl::StrCat(
        "shard ", endpoint_.shard_id(), " sent a reply that does not parse: ", decoded.message()));
    return;
  }
  if (wire_ != nullptr) {
    wire_->CountReceived(
        static_cast<int64_t>(bytes.Length()), static_cast<int64_t>(reply.values.size()),
        reply.message.has_pull() ? rpc::SparseBytes(reply.message.pull().sparse()) : 0);
  }
  int64_t id = 0;  // the hello ack has no request id
  if (reply.message.has_pull()) id = reply.message.pull().request_id();
  if (reply.message.has_ack()) id = reply.message.ack().request_id();
  absl::MutexLock lock(&mu_);
  replies_[id] = std::move(reply);
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

absl::StatusOr<int64_t> ShardConnection::SendPull(int64_t min_version,
                                                  std::vector<v1::SparseRows> sparse,
                                                  std::optional<EvalPointRead> read) {
  v1::WorkerToShard message;
  const int64_t id = next_request_id_++;
  message.mutable_pull()->set_request_id(id);
  message.mutable_pull()->set_min_version(min_version);
  if (read.has_value()) {
    message.mutable_pull()->set_eval_point(std::max<int64_t>(1, read->point));
    message.mutable_pull()->set_release_point(read->release);
    message.mutable_pull()->set_keep_point(read->release && read->keep);
  }
  message.mutable_pull()->set_encoding(options_.dense_encoding);
  for (v1::SparseRows& rows : sparse) *message.mutable_pull()->add_sparse() = std::move(rows);
  if (!Write(rpc::Encode(message), 0, rpc::SparseBytes(message.pull().sparse()))) {
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), ": stream broken"));
  }
  return id;
}

absl::StatusOr<int64_t> ShardConnection::SendPush(int64_t token, int64_t samples,
                                                  std::string_view gradient,
                                                  std::vector<v1::SparseRows> sparse) {
  v1::PushRequest push;
  const int64_t id = next_request_id_++;
  push.set_request_id(id);
  push.set_token(token);
  push.set_samples(samples);
  push.set_encoding(options_.dense_encoding);
  for (v1::SparseRows& rows : sparse) *push.add_sparse() = std::move(rows);
  if (!Write(rpc::EncodeWithPayload(rpc::kPushGradient, push,
                                    rpc::SliceCopying({gradient.data(), gradient.size()})),
             static_cast<int64_t>(gradient.size()), rpc::SparseBytes(push.sparse()))) {
    return absl::UnavailableError(absl::StrCat("shard ", endpoint_.shard_id(), ": stream broken"));
  }
  return id;
}

absl::StatusOr<ShardReply> ShardConnection::WaitReply(int64_t request_id, absl::Duration timeout,
                                                      const std::function<bool()>& abort) {
  // How often a long wait (a sync barrier) checks whether it should give up early.
  constexpr absl::Duration kAbortPoll = absl::Milliseconds(200);
  const absl::Time deadline = absl::Now() + timeout;
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

absl::StatusOr<std::vector<int64_t>> ParameterClient::SendPulls(const TableKeys* keys,
                                                                TableRows* rows, bool newest,
                                                                std::optional<EvalPointRead> read) {
  if (keys != nullptr && !keys->empty() && rows == nullptr) {
    return absl::InvalidArgumentError("a pull of rows needs somewhere to put them");
  }
  // Route every key to its owner; the routing remembers where each came from, for the rows and
  // the push.
  SYNCOPATE_RETURN_IF_ERROR(routing_.Route(keys));
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
    absl::Status unpacked = pull.encoding() == v1::DENSE_BFLOAT16
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
  std::vector<std::string> encoded(shards_.size());
  std::vector<std::string_view> dense(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    const v1::ShardEndpoint& endpoint = shards_[s]->endpoint();
    const std::span<const float> slice =
        gradient.subspan(endpoint.flat_begin(), endpoint.flat_end() - endpoint.flat_begin());
    if (options_.connection.dense_encoding == v1::DENSE_BFLOAT16) {
      residuals_[s].resize(slice.size(), 0.0f);
      encoded[s] = tensor::PackBfloat16(slice, residuals_[s]);
      dense[s] = encoded[s];
    } else {
      dense[s] = tensor::PackedView(slice);
    }
  }
  PushStats stats;
  std::vector<size_t> pending(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) pending[s] = s;
  absl::StatusOr<std::vector<int64_t>> pull_ids = absl::UnknownError("no pull sent");
  // The membership race (ParameterClientOptions): FAILED_PRECONDITION is retried briefly.
  for (int attempt = 0; !pending.empty(); ++attempt) {
    std::vector<std::pair<size_t, int64_t>> ids;
    for (size_t s : pending) {
      absl::StatusOr<int64_t> id = shards_[s]->SendPush(tokens_[s], samples, dense[s], sparse[s]);
      if (!id.ok()) return id.status();
      ids.emplace_back(s, *id);
    }
    if (attempt == 0 && next != nullptr) {
      // The next pull goes out right behind the pushes, before their acks: the shard handles a
      // stream's messages in order, so it sees this push (sync: it waits for the barrier this
      // gradient belongs to, as PullAll's would), one round trip sooner.
      for (size_t s = 0; s < shards_.size(); ++s) {
        min_versions_[s] = NextPullMinVersion(modes_[s], tokens_[s]);
      }
      pull_ids = SendPulls(next->keys, next->rows, /*newest=*/false);
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
          if (ack.code() == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION) &&
              attempt < options_.membership_race_retries) {
            pending.push_back(s);
            continue;
          }
          ++stats.rejected;
          stats.rejections.push_back(ack);
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
    *next->pulled = pull_ids.ok() ? CollectPulls(*pull_ids, next->params, timeout, next->rows,
                                                 /*point_read=*/false)
                                  : pull_ids.status();
  }
  return stats;
}

}  // namespace syncopate::worker
