// A POSIX shared-memory segment between a shard and a worker on the same host: the co-located
// data plane (docs/decisions/0022-co-located-data-plane.md). The Train stream stays the control
// plane; the dense payloads of pushes and pulls are written here instead of into its messages,
// which spares the kernel's two loopback-TCP copies per direction, gRPC's framing of ~0.5 MiB
// messages and the wake-ups of their segments (docs/measurements/throughput.md).
//
// The shard creates the segment (Create): a random 128-bit name under /dev/shm, O_EXCL, mode
// 0600, its size fixed, a header holding a magic number and a random nonce. It offers the name,
// the size and the nonce in its TrainHelloAck; the worker maps it (Open) and takes it only when
// the header it maps carries that nonce — the proof that both see the same memory, stronger than
// comparing host names. Whoever maps second unlinks the name, so nothing is left behind once
// both hold it; the shard also unlinks at the stream's first request and when the stream ends,
// and a segment the shard created while a worker never mapped it is removed by the shard's
// destructor. A SIGKILL between Create and the worker's Open can leave one name behind:
// RemoveStale() (each shard at start) removes names whose creating process is gone.
//
// Thread-safety: a SharedSegment is thread-compatible; the memory it maps is shared with another
// process, so whoever writes or reads it synchronises through the stream's messages (a slot is
// written before the message that names it is sent, and read after it arrives).
#ifndef SYNCOPATE_LIBS_RPC_SHARED_SEGMENT_H_
#define SYNCOPATE_LIBS_RPC_SHARED_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace syncopate::rpc {

// This host and IPC namespace as a peer can compare cheaply before trying a segment: the
// kernel's boot id and the inode of /proc/self/ns/ipc. Empty when either cannot be read.
std::string HostIdentity();

class SharedSegment {
 public:
  // Bytes at the start of every segment before the caller's areas (magic and nonce).
  static constexpr size_t kHeaderBytes = 64;
  static constexpr size_t kNonceBytes = 16;

  // A new segment of kHeaderBytes + `payload_bytes`, mapped read-write. Its name begins with
  // /syncopate-<pid>- (RemoveStale reads the pid).
  static absl::StatusOr<SharedSegment> Create(size_t payload_bytes);
  // Maps the segment `name` and checks that it is `size` bytes and carries `nonce`; then unlinks
  // the name (the creator holds it mapped). NOT_FOUND when it cannot be opened (another host or
  // IPC namespace), FAILED_PRECONDITION when the size or nonce differ: either way the caller
  // stays on the wire.
  static absl::StatusOr<SharedSegment> Open(const std::string& name, size_t size,
                                            std::string_view nonce);
  // Removes segments of this naming scheme whose creating process no longer exists; the number
  // removed.
  static int RemoveStale();

  SharedSegment() = default;
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();  // unmaps; unlinks the name if this side still holds it

  bool mapped() const { return base_ != nullptr; }
  const std::string& name() const { return name_; }
  const std::string& nonce() const { return nonce_; }
  size_t size() const { return size_; }
  // The bytes after the header: [0, size() - kHeaderBytes).
  std::span<char> payload() const;
  // Removes the name (the mapping stays). Idempotent.
  void Unlink();

 private:
  SharedSegment(std::string name, std::string nonce, char* base, size_t size, bool linked)
      : name_(std::move(name)),
        nonce_(std::move(nonce)),
        base_(base),
        size_(size),
        linked_(linked) {}
  void Release();

  std::string name_;
  std::string nonce_;
  char* base_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // this side still has to unlink name_
};

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_SHARED_SEGMENT_H_
