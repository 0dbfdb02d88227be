#include "libs/rpc/train_wire.h"

#include <string>

namespace syncopate::rpc {

std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> OpenRawTrainStream(
    const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* context) {
  // gRPC keeps the name as a static slice for the call's life: it lives as long as the process.
  static const std::string* const kMethod =
      new std::string(std::string("/") + v1::ParameterShard::service_full_name() + "/Train");
  // Unregistered with the channel: a stream is opened once per (re)connection.
  const grpc::internal::RpcMethod method(kMethod->c_str(),
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  return std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, context));
}

}  // namespace syncopate::rpc
