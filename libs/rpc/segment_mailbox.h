// A one-message mailbox in a shared-memory segment (rpc::SharedSegment): the co-located data
// plane's doorbell (ADR 0022). A Train stream whose worker mapped its shard's segment sends its
// pull and push requests through one mailbox and takes the answers from another, instead of
// through gRPC: a request then costs a memcpy and a futex wake-up rather than HTTP/2 framing,
// loopback TCP and the hand-offs between gRPC's threads (measured: ~2.6 ms of a step's fixed
// cost with two workers and two shards, docs/measurements/throughput.md).
//
// Layout: a 64-byte header — a 32-bit sequence number (the futex word), the message's length —
// then up to capacity() bytes. One writer and one reader, and the protocol keeps at most one
// message in the box: a worker posts a request only once the previous one was answered, and a
// shard posts exactly one answer per request. The reader copies a message out before it uses
// it: the writer may be another process, which could change the bytes under it (a shard parses
// only its own copy, and treats a length beyond the capacity as malformed).
//
// Thread-safety: Post from one thread at a time, Take from one thread at a time; Post and Take
// may run concurrently (different processes, or threads). Wake may be called from any thread.
#ifndef SYNCOPATE_LIBS_RPC_SEGMENT_MAILBOX_H_
#define SYNCOPATE_LIBS_RPC_SEGMENT_MAILBOX_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace syncopate::rpc {

class SegmentMailbox {
 public:
  static constexpr size_t kHeaderBytes = 64;

  SegmentMailbox() = default;
  // Over `memory` (kHeaderBytes + the capacity), 4-byte aligned, inside a shared mapping. The
  // creator zeroes it first (a new segment is zero-filled by the kernel).
  explicit SegmentMailbox(std::span<char> memory);

  bool valid() const { return header_ != nullptr; }
  size_t capacity() const { return capacity_; }

  // Copies `message` in and wakes the reader. INVALID_ARGUMENT when it exceeds the capacity.
  absl::Status Post(std::string_view message);

  // Waits until a message newer than `seen` is posted, at most `timeout`; then copies it into
  // `out`, sets `seen` to its sequence number and returns OK. DEADLINE_EXCEEDED on timeout (also
  // when woken by Wake without a message); DATA_LOSS for a length beyond the capacity (`seen`
  // still advances: the message is consumed).
  absl::Status Take(uint32_t& seen, std::string& out, absl::Duration timeout);

  // The sequence number of the last message posted (a reader starts from it).
  uint32_t sequence() const;

  // Wakes a reader blocked in Take without posting (it returns DEADLINE_EXCEEDED): a closing
  // stream's thread then sees its stop flag.
  void Wake();

 private:
  uint32_t* sequence_word() const;
  char* header_ = nullptr;
  char* body_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_SEGMENT_MAILBOX_H_
