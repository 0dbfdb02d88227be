// The ParameterStore of a real worker (or evaluator): one Train stream per shard, pulls and
// pushes fanned out to all shards in parallel, replies matched by request id.
//
// Every wait is bounded by a timeout; a broken stream surfaces as UNAVAILABLE and the caller
// reconnects with rpc::Backoff. A stream the shard ended with a code rpc::IsRetryable calls
// permanent (a wrong join token, another job's shard, an invalid request) keeps that code. The
// client
// tracks, per shard, the version its parameters came from (the token of the next push) and the
// version the next pull must wait for (sync: the next barrier). Thread-safety: thread-compatible
// (one training loop uses it).
#ifndef SYNCOPATE_LIBS_WORKER_PARAMETER_CLIENT_H_
#define SYNCOPATE_LIBS_WORKER_PARAMETER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/rpc/client_stream.h"
#include "libs/rpc/payload_codec.h"
#include "libs/rpc/security.h"
#include "libs/rpc/segment_mailbox.h"
#include "libs/rpc/shared_segment.h"
#include "libs/rpc/wire_bytes.h"
#include "libs/worker/key_routing.h"
#include "libs/worker/parameter_store.h"
#include "syncopate/v1/shard.grpc.pb.h"

namespace syncopate::worker {

// A shard's answer: the message and, for a pull, its dense values, left in the slices they
// arrived in until they are copied into the parameters.
struct ShardReply {
  v1::ShardToWorker message;  // a pull's `values` empty: they are in `values`
  rpc::ReceivedPayload values;
  // Or, answered through the co-located plane (PullResponse.values_in_segment): float32 in the
  // segment's pull area, valid until the connection's next pull.
  std::span<const char> values_in_segment;
};

// Who a client is to the shards, and how it reaches them.
struct ShardConnectionOptions {
  int32_t worker_id = 0;
  v1::Role role = v1::ROLE_WORKER;
  // Both go into the TrainHello: the shard refuses a wrong token with UNAUTHENTICATED, and
  // another job's shard refuses the job id with FAILED_PRECONDITION.
  std::string join_token = "";
  std::string job_id = "";
  // mTLS when it holds certificates; plaintext by default.
  rpc::TransportSecurity security = {};
  // How the dense values of pulls and pushes travel (the job's wire_precision, for trainers):
  // bfloat16 halves the bytes; pushes then carry error feedback (ParameterClient).
  v1::DenseEncoding dense_encoding = v1::DENSE_FLOAT32;
  // Take a shard's offer of the co-located data plane (ADR 0022) when it is on this host and IPC
  // namespace: dense payloads through shared memory, float32 whatever dense_encoding says
  // (--shared_memory). Off, or on another host: the wire, as before.
  bool shared_memory = false;
};

// One Train stream to one shard. The stream carries raw bytes (rpc::EncodeWithPayload and
// DecodeWithPayload: protobuf's encoding, the dense payloads beside protobuf; ADR 0012).
class ShardConnection {
 public:
  // Counts what the stream moves into `wire` when given (it must outlive the connection).
  ShardConnection(const v1::ShardEndpoint& endpoint, ShardConnectionOptions options,
                  rpc::WireBytesCounter* wire = nullptr);
  ~ShardConnection();

  // Opens the stream and waits for the shard's hello ack.
  absl::Status Connect(absl::Duration timeout);
  // `read`: an evaluation point's read instead (min_version is then ignored).
  absl::StatusOr<int64_t> SendPull(int64_t min_version, std::vector<v1::SparseRows> sparse = {},
                                   std::optional<EvalPointRead> read = std::nullopt);
  // The pull that rides on a push (PushRequest.then_pull): one message, answered by one (the
  // pull's response, carrying the push's ack).
  struct ThenPull {
    int64_t min_version = 0;
    std::vector<v1::SparseRows> sparse;
  };
  struct PushAndPullIds {
    int64_t push = 0;
    int64_t pull = 0;  // 0: no pull rode on the push
  };
  // `gradient`: the shard's range packed as options.dense_encoding says, copied once, into the
  // message. Both ids are waited for as usual: WaitReply(push) returns the ack once the pull's
  // response arrives (or at once if the shard rejected the push, which drops its pull).
  absl::StatusOr<PushAndPullIds> SendPush(int64_t token, int64_t samples, std::string_view gradient,
                                          std::vector<v1::SparseRows> sparse = {},
                                          std::optional<ThenPull> then_pull = std::nullopt);
  // Waits up to `timeout`; gives up early with CANCELLED once `abort` returns true (polled).
  absl::StatusOr<ShardReply> WaitReply(int64_t request_id, absl::Duration timeout,
                                       const std::function<bool()>& abort = nullptr);

  const v1::ShardEndpoint& endpoint() const { return endpoint_; }
  bool broken() const;
  // The shard's segment is mapped: pushes write their dense gradient there (float32).
  bool pushes_in_segment() const { return !push_area_.empty(); }

 private:
  // A pull request with a fresh id (SendPull's `read` and `min_version`).
  v1::PullRequest NewPull(int64_t min_version, std::vector<v1::SparseRows> sparse,
                          std::optional<EvalPointRead> read);
  // Maps the shard's offer, if any (after the hello ack); on failure the stream stays on the wire.
  void TakeOffer(const v1::TrainHelloAck& ack);
  void OnMessage(grpc::ByteBuffer& bytes);
  // Files a decoded answer under its request id(s) (a pull that rode on a push: both).
  void File(ShardReply reply);
  // The stream is done for: every wait returns INTERNAL saying `what` the shard did.
  void Malformed(const std::string& what);
  // Posts `message` to the request mailbox when it is free and the message fits; false: the
  // caller sends it on the stream.
  bool Post(const v1::WorkerToShard& message, int64_t request_id);
  // Waits up to `timeout` for the mailbox's answer and files it; DEADLINE_EXCEEDED if none came.
  absl::Status TakeBoxAnswer(absl::Duration timeout);
  void OnEnd(const grpc::Status& status);
  // `dense` and `sparse`: the bytes of the message's payload and embedding rows (WireBytes).
  bool Write(const grpc::ByteBuffer& message, int64_t dense, int64_t sparse);

  const v1::ShardEndpoint endpoint_;
  const ShardConnectionOptions options_;
  rpc::WireBytesCounter* const wire_;  // null: not counted
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::ClientStream<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
  int64_t next_request_id_ = 1;
  // The co-located plane, when the shard offered it and it mapped (Connect): its push and pull
  // areas. At most one pull answered in the pull area is outstanding (segment_pull_); its reply
  // is read before the next such pull is sent, so the shard never writes under the reader.
  rpc::SharedSegment segment_;
  std::span<char> push_area_;
  std::span<const char> pull_area_;
  int64_t segment_pull_ = 0;  // the request id answered in the pull area, 0: none outstanding
  // The segment's mailboxes (the doorbells): a request posted to requests_ is answered in
  // responses_, taken by WaitReply on the caller's thread. One request in the mailbox at a time
  // (box_request_, 0: none); others take the stream.
  rpc::SegmentMailbox requests_;
  rpc::SegmentMailbox responses_;
  uint32_t responses_seen_ = 0;
  int64_t box_request_ = 0;

  mutable absl::Mutex mu_;
  std::map<int64_t, ShardReply> replies_ ABSL_GUARDED_BY(mu_);
  // A reply that did not decode: the stream is cancelled and every wait returns this.
  absl::Status malformed_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

struct ParameterClientOptions {
  ShardConnectionOptions connection = {};
  // The row width of each of the model's embedding tables.
  std::vector<int32_t> table_dims = {};
  // Cuts every wait short once it returns true: the job stopped or the process is shutting down.
  std::function<bool()> abort = nullptr;
  // The membership race: a worker is welcomed a moment before the coordinator's membership notice
  // reaches every shard, so its first push can find a shard that does not know it yet
  // (FAILED_PRECONDITION "not a member"). Such a push is sent again, up to this many times,
  // `membership_race_wait` apart; then it counts as rejected.
  int membership_race_retries = 20;
  absl::Duration membership_race_wait = absl::Milliseconds(100);
  // How those waits pass (default: sleep); returning true ends the push with CANCELLED.
  InterruptibleWait wait = nullptr;
};

class ParameterClient final : public ParameterStore {
 public:
  ParameterClient(const v1::ShardMap& map, ParameterClientOptions options);

  // (Re)connects every broken or unopened shard stream.
  absl::Status Connect(absl::Duration timeout) override;

  // Pulls every shard's slice into `params` (the full flat vector) and, when `keys` is given
  // (distinct keys per table), the rows of those keys into `rows`, each key from the shard
  // embedding::OwnerShard assigns it.
  absl::StatusOr<PullStats> PullAll(std::span<float> params, absl::Duration timeout, bool newest,
                                    const TableKeys* keys, TableRows* rows) override;
  absl::StatusOr<PullStats> PullEvalPoint(const EvalPointRead& read, std::span<float> params,
                                          absl::Duration timeout, const TableKeys* keys,
                                          TableRows* rows) override;
  // Pushes each shard its slice of `gradient` (a mean over `samples` examples), computed on
  // the versions of the last pull, and its share of `row_grads` (aligned with the keys of the
  // last pull).
  absl::StatusOr<PushStats> PushAll(std::span<const float> gradient, int64_t samples,
                                    absl::Duration timeout, const TableRows* row_grads) override;
  // The next pull rides on each shard's push (one message each way per shard and step instead
  // of two; issue 32 item 3): the shard handles it right after the push, so the pull sees this
  // push, and in sync it is held for the barrier this gradient belongs to, exactly as PullAll
  // after PushAll; the push's ack comes back inside the pull's response. A shard that rejects
  // the push drops its pull: the membership race sends both again; any other rejection is
  // followed by a pull of its own.
  absl::StatusOr<PushStats> PushAllThenPull(std::span<const float> gradient, int64_t samples,
                                            absl::Duration timeout, const TableRows* row_grads,
                                            const NextPull& next) override;

  int64_t token(size_t shard) const override { return tokens_[shard]; }
  v1::WireBytes wire_bytes() const override { return wire_.Totals(); }
  size_t num_shards() const { return shards_.size(); }

 private:
  // Routes `keys` to their owners for the next pull (rows of keys need somewhere to go).
  absl::Status RoutePull(const TableKeys* keys, const TableRows* rows);
  // Routes `keys` and sends every shard its pull; the request ids, by shard.
  absl::StatusOr<std::vector<int64_t>> SendPulls(const TableKeys* keys, TableRows* rows,
                                                 bool newest,
                                                 std::optional<EvalPointRead> read = std::nullopt);
  // Waits for the pulls `ids` and unpacks them into `params` and `rows`.
  // `point_read`: the replies of PullEvalPoint (no tokens taken; a shard without the point
  // leaves its part untouched).
  absl::StatusOr<PullStats> CollectPulls(const std::vector<int64_t>& ids, std::span<float> params,
                                         absl::Duration timeout, TableRows* rows, bool point_read);
  // Each shard's slice of `gradient` as the push sends it: the floats themselves, or with
  // DENSE_BFLOAT16 their rounding (carrying residuals_) into `encoded`, which the views point into.
  std::vector<std::string_view> EncodeDense(std::span<const float> gradient,
                                            std::vector<std::string>& encoded);
  // PushAll, and with `next` PushAllThenPull.
  absl::StatusOr<PushStats> Push(std::span<const float> gradient, int64_t samples,
                                 absl::Duration timeout, const TableRows* row_grads,
                                 const NextPull* next);

  // Waits `membership_race_wait` between membership-race retries; true: stop.
  bool WaitForMembership();

  const ParameterClientOptions options_;
  rpc::WireBytesCounter wire_;  // before shards_: their reader threads count into it to the end
  std::vector<std::unique_ptr<ShardConnection>> shards_;
  const v1::ShardMap map_;
  const std::function<bool()> abort_;
  std::vector<int64_t> tokens_;        // version of the last pulled parameters
  std::vector<int64_t> min_versions_;  // what the next pull waits for
  std::vector<v1::Mode> modes_;
  // bfloat16 pushes: per shard, what rounding has not delivered yet (tensor::PackBfloat16's error
  // feedback), added to the next push.
  std::vector<std::vector<float>> residuals_;
  // The last pull's keys, routed to their owners: the push splits its row gradients the same way.
  KeyRouting routing_;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_PARAMETER_CLIENT_H_
