// ParameterStore: the parameter shards as a training or evaluation loop sees them — connect,
// pull the current parameters (and the embedding rows a batch touches), push a gradient. The
// real one is ParameterClient (gRPC streams to every shard); tests give the loops an in-memory
// store, so the loops are tested without sockets.
//
// Errors: CANCELLED when the abort predicate cut a wait short; a code rpc::IsRetryable calls
// permanent for a refusal retrying cannot fix; anything else is transient (reconnect, back off).
// Thread-safety: implementations are thread-compatible (one loop uses one store).
#ifndef SYNCOPATE_LIBS_WORKER_PARAMETER_STORE_H_
#define SYNCOPATE_LIBS_WORKER_PARAMETER_STORE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/workload/workload.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::worker {

// Waits up to the duration; true once the caller should stop waiting for good (the process is
// shutting down: runtime::WaitForShutdown). The default of every option of this type sleeps and
// never stops.
using InterruptibleWait = std::function<bool(absl::Duration)>;

// Per embedding table: keys, or their rows (keys x width floats) in the same order (the
// workload's types: a batch's keys go to the store as the workload lists them).
using workload::TableKeys;
using workload::TableRows;

struct PullStats {
  double held_seconds = 0;  // longest time a shard held the pull (barrier wait)
  std::vector<int64_t> versions;
  std::vector<v1::Mode> modes;
  // An evaluation point's read (PullEvalPoint), per shard: the point served (0: none yet), how
  // long before the reply the shard made it, and the examples the shard had applied then.
  std::vector<int64_t> eval_points;
  std::vector<double> point_age_seconds;
  std::vector<int64_t> point_examples;
};

// Which evaluation point a read asks for (EvalSpec), whether it is the evaluation's last read
// of it (the shards may then drop it), and whether the shards should keep it.
struct EvalPointRead {
  int64_t point = 1;
  bool release = false;
  // With release: the point is the version the job keeps (PullRequest.keep_point).
  bool keep = false;
};

struct PushStats {
  int applied = 0;
  int decayed = 0;
  int dropped = 0;
  int rejected = 0;
  std::vector<v1::PushAck> rejections;
  double ack_seconds = 0;  // from the first send to the last ack
};

// Where PushAllThenPull puts the next step's pull: as PullAll's arguments (newest = false), and
// its outcome, which is set whenever the push itself succeeded.
struct NextPull {
  std::span<float> params;
  const TableKeys* keys = nullptr;
  TableRows* rows = nullptr;
  absl::StatusOr<PullStats>* pulled = nullptr;
};

class ParameterStore {
 public:
  virtual ~ParameterStore() = default;

  // (Re)connects whatever is broken or unopened.
  virtual absl::Status Connect(absl::Duration timeout) = 0;
  // Pulls the full flat parameter vector into `params` and, when `keys` is given (distinct keys
  // per table), those rows into `rows`. `newest`: do not wait for a sync barrier (the evaluator).
  // No default arguments here or in overrides: they bind by the static type (Google style).
  virtual absl::StatusOr<PullStats> PullAll(std::span<float> params, absl::Duration timeout,
                                            bool newest, const TableKeys* keys,
                                            TableRows* rows) = 0;
  // Like PullAll(newest), but the parameters as they were at an evaluation point: every shard
  // answers at once from the first point it keeps at or after `read.point`, or with none yet
  // (PullStats.eval_points 0; that shard's slice of `params` and its rows are left as they were).
  // A store without evaluation points answers UNIMPLEMENTED (the evaluator then goes by time).
  virtual absl::StatusOr<PullStats> PullEvalPoint(const EvalPointRead& read,
                                                  std::span<float> params, absl::Duration timeout,
                                                  const TableKeys* keys, TableRows* rows) {
    return absl::UnimplementedError("this parameter store keeps no evaluation points");
  }
  // Pushes `gradient` (a mean over `samples` examples, computed on the last pull's versions) and
  // `row_grads` (aligned with the last pull's keys).
  virtual absl::StatusOr<PushStats> PushAll(std::span<const float> gradient, int64_t samples,
                                            absl::Duration timeout, const TableRows* row_grads) = 0;
  // PushAll, then PullAll for the next step (the batch whose `next.keys` are given), as one
  // exchange: a store that can overlaps them, with the same parameters arriving as if called
  // one after the other. The default calls them one after the other.
  virtual absl::StatusOr<PushStats> PushAllThenPull(std::span<const float> gradient,
                                                    int64_t samples, absl::Duration timeout,
                                                    const TableRows* row_grads,
                                                    const NextPull& next) {
    absl::StatusOr<PushStats> pushed = PushAll(gradient, samples, timeout, row_grads);
    if (pushed.ok()) *next.pulled = PullAll(next.params, timeout, false, next.keys, next.rows);
    return pushed;
  }
  // The version the first shard's parameters came from at the last pull (the next push's token).
  virtual int64_t token(size_t shard) const = 0;
  // What the store moved on the wire since it was made (rpc/wire_bytes.h); a store without a
  // wire (an in-process fake) moves nothing.
  virtual v1::WireBytes wire_bytes() const { return {}; }
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_PARAMETER_STORE_H_
