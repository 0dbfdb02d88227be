// Messages whose one large `bytes` field travels beside protobuf's storage rather than in it.
//
// The dense gradient of a push and the parameters of a pull are nearly all of every Train
// message's bytes. Through protobuf's codec each crossed memory twice at each end: packed into
// the message's std::string and serialised into a slice; parsed into a std::string and unpacked
// into the destination. Here the outgoing payload is one slice of the message (one that
// references an immutable buffer, or one the sender filled directly), and a received payload
// stays in the slices gRPC received it in, to be copied once, into its destination span
// (docs/decisions/0012-payloads-beside-protobuf.md).
//
// The bytes on the wire are protobuf's encoding of the same message: the payload is a
// length-delimited field like any other, written after the container's other fields. So a
// peer on protobuf's codec (the generated stub: tests, grpcurl) interoperates, and the decoder
// accepts any valid encoding: fields in any order, the payload anywhere in its container.
//
// Thread-safety: free functions without shared state. A ReceivedPayload is a value; its const
// methods may be called concurrently.
#ifndef SYNCOPATE_LIBS_RPC_PAYLOAD_CODEC_H_
#define SYNCOPATE_LIBS_RPC_PAYLOAD_CODEC_H_

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "libs/tensor/packed.h"

namespace syncopate::rpc {

// Where the payload sits: the `bytes` field numbered `payload` of the message field numbered
// `container` of the top-level message (WorkerToShard.push.gradient, ShardToWorker.pull.values).
struct PayloadField {
  int container = 0;
  int payload = 0;
};

// The payload of a received message, still in gRPC's slices, which it holds references to.
class ReceivedPayload {
 public:
  ReceivedPayload() = default;
  // Move-only: the views may point into the slices themselves (gRPC inlines small ones).
  ReceivedPayload(ReceivedPayload&&) = default;
  ReceivedPayload& operator=(ReceivedPayload&&) = default;
  ReceivedPayload(const ReceivedPayload&) = delete;
  ReceivedPayload& operator=(const ReceivedPayload&) = delete;

  size_t size() const { return size_; }
  // Views into the slices this object holds: valid while it lives (moves keep them valid).
  const tensor::ByteChunks& chunks() const { return chunks_; }

 private:
  friend absl::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, const PayloadField& field,
                                        google::protobuf::MessageLite& message,
                                        ReceivedPayload& payload);
  std::vector<grpc::Slice> slices_;
  tensor::ByteChunks chunks_;
  size_t size_ = 0;
};

// A slice over `values`' bytes that keeps them alive until gRPC has sent them: no copy. The
// values must not change while any slice of them lives (hence const).
grpc::Slice SliceReferencing(std::shared_ptr<const std::vector<float>> values);
// The same over shared bytes (one bfloat16 packing sent to every puller of a version).
grpc::Slice SliceReferencing(std::shared_ptr<const std::string> bytes);

// A slice holding a copy of `bytes`.
grpc::Slice SliceCopying(std::span<const char> bytes);

// A slice that owns `bytes` (moved in, not copied) until gRPC has sent them.
grpc::Slice SliceOwning(std::string bytes);

// The encoding of a top-level message whose only field is `field.container`, set to `container`
// with its payload field holding `payload` (referenced, not copied). `container`'s own payload
// field must be empty: it would be sent twice, and the second copy would win.
grpc::ByteBuffer EncodeWithPayload(const PayloadField& field,
                                   const google::protobuf::MessageLite& container,
                                   const grpc::Slice& payload);

// Any message, serialised by protobuf into one slice (the small ones: hellos, acks).
grpc::ByteBuffer Encode(const google::protobuf::MessageLite& message);

// Parses `buffer` into `message`, except the payload field, whose bytes (its last occurrence,
// the one protobuf would keep) `payload` references; empty when the message has none. So the
// message is what protobuf would parse with the payload field cleared. INVALID_ARGUMENT, with
// `message` and `payload` unspecified, for bytes that are not a valid encoding; also for two
// occurrences of the container field (which protobuf would merge) and for groups (proto2 only):
// neither comes from any protobuf serialiser of these messages.
absl::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, const PayloadField& field,
                               google::protobuf::MessageLite& message, ReceivedPayload& payload);

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_PAYLOAD_CODEC_H_
