// Fuzz target: rpc::DecodeWithPayload against protobuf's own parser. The first byte picks the
// direction (a WorkerToShard with its push gradient beside it, or a ShardToWorker with its pull
// values) and the next ones where the bytes are cut into slices (as gRPC may deliver them); the
// rest is the message. Whenever protobuf parses the bytes, the decoder must agree exactly: the
// same message once the payload is put back, or one of the refusals its header documents (the
// container field twice, a group). Whatever protobuf refuses, the decoder must refuse too.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/support/byte_buffer.h"
#include "libs/rpc/payload_codec.h"
#include "libs/rpc/train_wire.h"
#include "syncopate/v1/shard.pb.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace v1 = syncopate::v1;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using syncopate::rpc::PayloadField;

void Check(bool condition) {
  if (!condition) std::abort();
}

// True when a field of `set` is a group, or `container` occurs twice (length-delimited), or a
// group sits inside the container: the encodings the decoder refuses while protobuf accepts.
bool DocumentedRefusal(const std::string& bytes, int container) {
  UnknownFieldSet set;
  if (!set.ParseFromString(bytes)) return false;
  int containers = 0;
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& field = set.field(i);
    if (field.type() == UnknownField::TYPE_GROUP) return true;
    if (field.number() != container || field.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    ++containers;
    UnknownFieldSet inner;
    if (!inner.ParseFromString(field.length_delimited())) continue;
    for (int j = 0; j < inner.field_count(); ++j) {
      if (inner.field(j).type() == UnknownField::TYPE_GROUP) return true;
    }
  }
  return containers > 1;
}

// `put_back(message, payload)` sets the payload field, when the container is set.
template <typename Message, typename PutBack>
void CheckAgainstProtobuf(const std::vector<grpc::Slice>& slices, const std::string& bytes,
                          const PayloadField& field, PutBack put_back) {
  const grpc::ByteBuffer buffer(slices.data(), slices.size());
  Message decoded;
  syncopate::rpc::ReceivedPayload payload;
  const bool ok = syncopate::rpc::DecodeWithPayload(buffer, field, decoded, payload).ok();
  Message reference;
  const bool reference_ok = reference.ParseFromString(bytes);
  if (!ok) {
    Check(!reference_ok || DocumentedRefusal(bytes, field.container));
    return;
  }
  Check(reference_ok);
  Check(payload.size() == syncopate::tensor::TotalSize(payload.chunks()));
  std::string value;
  for (const std::span<const char> chunk : payload.chunks()) {
    value.append(chunk.data(), chunk.size());
  }
  put_back(decoded, value);
  Check(decoded.SerializeAsString() == reference.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  syncopate::fuzz::FuzzInput in(data, size);
  const uint8_t choice = in.Byte();
  // Up to three cut points, each the next byte's value into what remains.
  std::vector<size_t> cuts((choice >> 1) % 4);
  for (size_t& cut : cuts) cut = in.Byte();
  const std::string bytes = in.Rest();
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (const size_t cut : cuts) {
    const size_t end = std::min(bytes.size(), at + cut);
    slices.emplace_back(bytes.data() + at, end - at);
    at = end;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  if (choice & 1) {
    CheckAgainstProtobuf<v1::ShardToWorker>(slices, bytes, syncopate::rpc::kPullValues,
                                            [](v1::ShardToWorker& m, const std::string& v) {
                                              if (m.has_pull()) m.mutable_pull()->set_values(v);
                                            });
  } else {
    CheckAgainstProtobuf<v1::WorkerToShard>(slices, bytes, syncopate::rpc::kPushGradient,
                                            [](v1::WorkerToShard& m, const std::string& v) {
                                              if (m.has_push()) m.mutable_push()->set_gradient(v);
                                            });
  }
  return 0;
}
