#include "libs/rpc/payload_codec.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/rpc/train_wire.h"
#include "libs/tensor/packed.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::rpc {
namespace {

using ::testing::HasSubstr;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

std::string Join(const tensor::ByteChunks& chunks) {
  std::string out;
  for (const std::span<const char> chunk : chunks) out.append(chunk.data(), chunk.size());
  return out;
}

// `bytes` cut into slices at `cuts` (ascending offsets).
grpc::ByteBuffer Cut(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (const size_t cut : cuts) {
    slices.emplace_back(bytes.data() + at, cut - at);
    at = cut;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return {slices.data(), slices.size()};
}

v1::PushRequest SamplePush() {
  v1::PushRequest push;
  push.set_request_id(7);
  push.set_token(3);
  push.set_samples(64);
  v1::SparseRows* rows = push.add_sparse();
  rows->set_table(1);
  rows->set_keys(tensor::PackKeys(std::vector<uint64_t>{4, 8}));
  rows->set_values(tensor::PackFloats(std::vector<float>{1, 2, 3, 4}));
  return push;
}

TEST(PayloadCodec, TheEncodingIsProtobufs) {
  const std::vector<float> gradient = {1.5f, -2.0f, 0.25f, 1e-9f, 3.0f};
  const grpc::ByteBuffer encoded =
      EncodeWithPayload(kPushGradient, SamplePush(), SliceCopying(tensor::PackedView(gradient)));
  v1::WorkerToShard parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
  v1::WorkerToShard expected;
  *expected.mutable_push() = SamplePush();
  expected.mutable_push()->set_gradient(tensor::PackFloats(gradient));
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
}

TEST(PayloadCodec, DecodesProtobufsEncodingCutAnywhere) {
  v1::WorkerToShard message;
  *message.mutable_push() = SamplePush();
  const std::string gradient = tensor::PackFloats(std::vector<float>{1, 2, 3, 4, 5, 6, 7});
  message.mutable_push()->set_gradient(gradient);
  const std::string bytes = message.SerializeAsString();
  v1::WorkerToShard expected = message;
  expected.mutable_push()->clear_gradient();
  // Every single cut (through tags, lengths and floats alike), and one byte per slice.
  std::vector<std::vector<size_t>> cuttings;
  for (size_t cut = 0; cut <= bytes.size(); ++cut) cuttings.push_back({cut});
  cuttings.emplace_back();
  for (size_t cut = 1; cut < bytes.size(); ++cut) cuttings.back().push_back(cut);
  for (const std::vector<size_t>& cuts : cuttings) {
    v1::WorkerToShard decoded;
    ReceivedPayload payload;
    ASSERT_TRUE(DecodeWithPayload(Cut(bytes, cuts), kPushGradient, decoded, payload).ok());
    EXPECT_EQ(decoded.SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ(Join(payload.chunks()), gradient);
    EXPECT_EQ(payload.size(), gradient.size());
    std::vector<float> floats(7);
    EXPECT_TRUE(tensor::UnpackFloatsInto(payload.chunks(), floats).ok());
    EXPECT_EQ(floats, (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
  }
}

TEST(PayloadCodec, RoundTripsThePullReplyWithoutCopyingItsValues) {
  auto values = std::make_shared<const std::vector<float>>(std::vector<float>{0.5f, -1.0f, 2.0f});
  const std::weak_ptr<const std::vector<float>> watch = values;
  v1::PullResponse response;
  response.set_request_id(11);
  response.set_version(4);
  response.set_mode(v1::MODE_GBA);
  response.set_look_ahead_updates(1.5);
  ReceivedPayload payload;
  v1::ShardToWorker decoded;
  {
    const grpc::ByteBuffer encoded =
        EncodeWithPayload(kPullValues, response, SliceReferencing(std::move(values)));
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(encoded.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);  // the header, and the values where they are
    EXPECT_EQ(reinterpret_cast<const float*>(slices[1].begin()), watch.lock()->data());
    ASSERT_TRUE(DecodeWithPayload(encoded, kPullValues, decoded, payload).ok());
  }
  EXPECT_FALSE(watch.expired());  // the received payload still references them
  EXPECT_EQ(decoded.pull().SerializeAsString(), response.SerializeAsString());
  std::vector<float> out(3);
  ASSERT_TRUE(tensor::UnpackFloatsInto(payload.chunks(), out).ok());
  EXPECT_EQ(out, (std::vector<float>{0.5f, -1.0f, 2.0f}));
  payload = ReceivedPayload();
  EXPECT_TRUE(watch.expired());  // and the last reference released them
}

TEST(PayloadCodec, MessagesWithoutThePayloadDecodeAsProtobufWould) {
  v1::WorkerToShard hello;
  hello.mutable_hello()->set_worker_id(5);
  hello.mutable_hello()->set_join_token("token");
  v1::WorkerToShard decoded;
  ReceivedPayload payload;
  ASSERT_TRUE(DecodeWithPayload(Encode(hello), kPushGradient, decoded, payload).ok());
  EXPECT_EQ(decoded.SerializeAsString(), hello.SerializeAsString());
  EXPECT_EQ(payload.size(), 0u);
  // A later oneof field clears the container, as protobuf's parse does.
  v1::WorkerToShard push;
  *push.mutable_push() = SamplePush();
  const std::string bytes = push.SerializeAsString() + hello.SerializeAsString();
  ASSERT_TRUE(DecodeWithPayload(Cut(bytes, {}), kPushGradient, decoded, payload).ok());
  EXPECT_TRUE(decoded.has_hello());
  EXPECT_FALSE(decoded.has_push());
}

TEST(PayloadCodec, RefusesWhatIsNotAValidEncoding) {
  v1::WorkerToShard message;
  *message.mutable_push() = SamplePush();
  message.mutable_push()->set_gradient(std::string(40, 'g'));
  const std::string bytes = message.SerializeAsString();
  v1::WorkerToShard decoded;
  ReceivedPayload payload;
  for (size_t length = 1; length < bytes.size(); ++length) {  // every truncation
    const absl::Status status =
        DecodeWithPayload(Cut(bytes.substr(0, length), {}), kPushGradient, decoded, payload);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << length;
    EXPECT_THAT(status.message(), HasSubstr("malformed message"));
  }
  const absl::Status twice =
      DecodeWithPayload(Cut(bytes + bytes, {}), kPushGradient, decoded, payload);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("field 3 twice"));
  // Invalid UTF-8 in a string field: protobuf's refusal, passed on.
  v1::WorkerToShard hello;
  hello.mutable_hello()->set_join_token("ok");
  std::string bad = hello.SerializeAsString();
  bad[bad.size() - 1] = '\xff';
  EXPECT_EQ(DecodeWithPayload(Cut(bad, {}), kPushGradient, decoded, payload).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::rpc
