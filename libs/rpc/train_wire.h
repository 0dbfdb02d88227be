// The ParameterShard.Train stream as raw bytes: where its dense payloads sit, for
// rpc::EncodeWithPayload and DecodeWithPayload (ADR 0012), and the client side of the method
// with gRPC's ByteBuffer as the message type. Shared by the shard's service, the worker's
// connection and the tests that speak the stream directly.
// Thread-safety: constants and a free function without shared state.
#ifndef SYNCOPATE_LIBS_RPC_TRAIN_WIRE_H_
#define SYNCOPATE_LIBS_RPC_TRAIN_WIRE_H_

#include <cstdint>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "libs/rpc/payload_codec.h"
#include "syncopate/v1/shard.grpc.pb.h"

namespace syncopate::rpc {

// WorkerToShard.push.gradient and ShardToWorker.pull.values.
inline constexpr PayloadField kPushGradient{v1::WorkerToShard::kPushFieldNumber,
                                            v1::PushRequest::kGradientFieldNumber};
inline constexpr PayloadField kPullValues{v1::ShardToWorker::kPullFieldNumber,
                                          v1::PullResponse::kValuesFieldNumber};

// The Train stream's wire version, sent in every TrainHello: a shard refuses another with
// FAILED_PRECONDITION (a worker and a shard of different releases could misread each other's
// payloads). 1: dense payloads float32 or bfloat16 as DenseEncoding says (issue 32). 2: evaluation
// points (PullRequest.eval_point; an older shard would answer the newest parameters as "no point
// yet" forever, ADR 0015). 3: a push may carry the next pull (PushRequest.then_pull), answered
// with the push's ack inside the pull's response (an older shard would never answer that pull).
// 4: the co-located data plane (TrainHello.host_id, SharedMemoryOffer, payloads in the segment;
// an older shard would take a push whose gradient is in the segment for an empty one).
// Raise it with any change an older peer would misread.
inline constexpr int32_t kTrainWireVersion = 4;

// Opens ParameterShard.Train on `channel` with raw bytes as messages: what the generated stub's
// Train does, without binding protobuf's codec. `channel` and `context` must outlive the stream
// (the stream calls back into the channel).
std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> OpenRawTrainStream(
    const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* context);

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_TRAIN_WIRE_H_
