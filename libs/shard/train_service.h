// The ParameterShard gRPC service: one Train stream per worker, wired to a ShardCore. The stream
// carries raw bytes: the dense payloads travel beside protobuf (rpc::DecodeWithPayload and
// EncodeWithPayload, ADR 0012); the encoding on the wire is protobuf's, so a client on the
// generated stub's protobuf codec is served the same. A worker on the same host may take the
// co-located data plane instead: its dense payloads then go through a shared-memory segment the
// stream creates and owns (ADR 0022); the stream stays the control plane.
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_SHARD_TRAIN_SERVICE_H_
#define SYNCOPATE_LIBS_SHARD_TRAIN_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/rpc/wire_bytes.h"
#include "libs/shard/shard_core.h"
#include "libs/shard/shard_metrics.h"
#include "syncopate/v1/shard.grpc.pb.h"

namespace syncopate::shard {

class TrainService final
    : public v1::ParameterShard::WithRawCallbackMethod_Train<v1::ParameterShard::Service> {
 public:
  // `join_token`: every TrainHello must carry it (empty = no check). `shared_memory`: offer the
  // co-located data plane (rpc::SharedSegment, ADR 0022) to a worker whose hello names this
  // host and IPC namespace.
  TrainService(ShardMetrics* metrics, std::string join_token, bool shared_memory = false);

  // The core exists once the coordinator has assigned a partition; until then streams are
  // refused with UNAVAILABLE (workers retry).
  void SetCore(std::shared_ptr<ShardCore> core);
  std::shared_ptr<ShardCore> core() const;
  ShardMetrics* metrics() const { return metrics_; }
  const std::string& join_token() const { return join_token_; }
  // rpc::HostIdentity() when the service offers shared memory; empty when it does not.
  const std::string& shared_memory_host() const { return shared_memory_host_; }
  // What every Train stream of this service moved (the shard's ShardReport.wire).
  rpc::WireBytesCounter& wire() { return wire_; }
  const rpc::WireBytesCounter& wire() const { return wire_; }
  // The bfloat16 packing of `values`, a shard's published copy: packed once and shared by every
  // puller of that copy (a sync barrier releases every worker's pull of one version; packing
  // each was issue 32's known waste). Packing another copy replaces it.
  std::shared_ptr<const std::string> Bfloat16Of(
      const std::shared_ptr<const std::vector<float>>& values);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Train(
      grpc::CallbackServerContext* context) override;

 private:
  ShardMetrics* const metrics_;
  const std::string join_token_;
  const std::string shared_memory_host_;
  rpc::WireBytesCounter wire_;
  mutable absl::Mutex mu_;
  std::shared_ptr<ShardCore> core_ ABSL_GUARDED_BY(mu_);
  absl::Mutex bfloat16_mu_;  // held while packing: concurrent pullers of one copy wait for it
  std::weak_ptr<const std::vector<float>> bfloat16_source_ ABSL_GUARDED_BY(bfloat16_mu_);
  std::shared_ptr<const std::string> bfloat16_packed_ ABSL_GUARDED_BY(bfloat16_mu_);
};

}  // namespace syncopate::shard

#endif  // SYNCOPATE_LIBS_SHARD_TRAIN_SERVICE_H_
