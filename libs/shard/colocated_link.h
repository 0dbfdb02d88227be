// The shard's side of the co-located data plane for one Train stream (ADR 0022): the shared
// segment it offers a worker on its host, the segment's areas (the worker's pushed gradient, the
// pulled values) and mailboxes (the worker's requests, the shard's answers), and the thread that
// waits on the request mailbox. TrainService's stream owns one per co-located worker and treats
// a request from the mailbox as one from the stream.
//
// Layout of the segment's payload, each part on its own cache line:
//   push area     the dense slice's float32 (none for the evaluator, which never pushes)
//   pull area     the dense slice's float32
//   request box   rpc::SegmentMailbox, kBoxCapacity bytes of WorkerToShard
//   response box  rpc::SegmentMailbox, kBoxCapacity bytes of ShardToWorker
//
// Thread-safety: Create, Describe and Serve before the link is shared; then WritePullValues,
// Answer and Notice may be called from any thread (the protocol keeps one answer in flight:
// ParameterClient has one request outstanding per stream), GradientChunks from any thread;
// Stop from one thread, once.
#ifndef SYNCOPATE_LIBS_SHARD_COLOCATED_LINK_H_
#define SYNCOPATE_LIBS_SHARD_COLOCATED_LINK_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "libs/rpc/segment_mailbox.h"
#include "libs/rpc/shared_segment.h"
#include "libs/tensor/packed.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::shard {

class ColocatedLink : public std::enable_shared_from_this<ColocatedLink> {
 public:
  // A mailbox holds one request (a push header, a then_pull and, for an embedding model, the
  // rows' keys and gradients) or one answer (an ack, a pull's rows): 2 MiB fits a CTR step's
  // rows many times over; a larger message takes the stream. Untouched pages cost nothing.
  static constexpr size_t kBoxCapacity = 2 << 20;

  // A segment for a stream whose dense slice is `dense_bytes` (> 0) of float32; `pushes`: the
  // peer trains (an evaluator only pulls).
  static absl::StatusOr<std::shared_ptr<ColocatedLink>> Create(size_t dense_bytes, bool pushes);
  // The thread holds the link too, so a handler that drops the stream's last reference never
  // pulls the link from under the loop; the segment goes with the last reference.
  ~ColocatedLink();

  // The offer for the TrainHelloAck.
  void Describe(v1::SharedMemoryOffer& offer) const;

  // Starts the thread that takes each request from the request box and calls `request` with its
  // bytes (a copy: the worker cannot change them under the shard), or `broken` once with why when
  // the box holds something it cannot be (then the thread ends).
  void Serve(std::function<void(std::string_view)> request,
             std::function<void(const absl::Status&)> broken);
  // Ends the thread (waits for a request it is handling; from the thread itself, lets it end
  // once its handler returns). Idempotent; the owner calls it when the stream ends.
  void Stop();

  // Removes the segment's name: the worker has mapped it, or never will. Idempotent.
  void Unlink();

  // The dense gradient of a push that says it is in the push area (PushRequest.
  // gradient_in_segment): a view of those bytes, or INVALID_ARGUMENT saying what is wrong (no
  // push area, more than it holds, an encoding other than float32, bytes in the message too:
  // `inline_bytes`).
  absl::Status GradientChunks(const v1::PushRequest& push, size_t inline_bytes,
                              tensor::ByteChunks& chunks) const;

  // Copies a pull's values into the pull area; false when they do not fit.
  bool WritePullValues(std::span<const float> values);

  // Posts a serialized ShardToWorker to the response box; false when it does not fit (the caller
  // sends it on the stream and posts Notice()).
  bool Answer(std::string_view message);
  // Posts the empty answer: "answered on the stream".
  void Notice();

 private:
  ColocatedLink() = default;
  // From `seen`, the request mailbox's sequence before any request could be posted.
  void ServeLoop(uint32_t seen, const std::function<void(std::string_view)>& request,
                 const std::function<void(const absl::Status&)>& broken);

  rpc::SharedSegment segment_;
  std::span<char> push_area_;
  std::span<char> pull_area_;
  size_t pull_offset_ = 0;
  size_t request_box_offset_ = 0;
  size_t response_box_offset_ = 0;
  rpc::SegmentMailbox requests_;
  rpc::SegmentMailbox responses_;
  absl::Mutex answer_mu_;  // one writer at a time into the pull area and the response box
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_COLOCATED_LINK_H_
