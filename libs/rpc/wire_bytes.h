// What a process's ParameterShard.Train streams moved, by direction and part (v1::WireBytes):
// counted where the messages are encoded and decoded (the worker's ShardConnection, the shard's
// TrainService), reported to the coordinator, shown per worker and shard by `syncopate status`
// and the run report, and exported as syncopate_{worker,shard}_wire_bytes_total. Bytes per
// example are what bound a parameter server on a real network (issue 32), so users see them.
// Thread-safety: WireBytesCounter is thread-safe (relaxed atomics: each total is exact, a
// Totals() snapshot may mix moments a message apart); WireBytesTally is thread-compatible; the
// free functions are pure.
#ifndef SYNCOPATE_LIBS_RPC_WIRE_BYTES_H_
#define SYNCOPATE_LIBS_RPC_WIRE_BYTES_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "google/protobuf/repeated_ptr_field.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::rpc {

class WireBytesCounter {
 public:
  // One message of `total` serialized bytes, of which `dense` are its dense payload and `sparse`
  // its embedding keys and rows; the rest is its header.
  void CountSent(int64_t total, int64_t dense, int64_t sparse);
  void CountReceived(int64_t total, int64_t dense, int64_t sparse);
  // Dense payload bytes moved through the co-located plane's shared memory (not the wire).
  void CountSharedSent(int64_t bytes) { shared_sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void CountSharedReceived(int64_t bytes) {
    shared_received_.fetch_add(bytes, std::memory_order_relaxed);
  }

  v1::WireBytes Totals() const;

 private:
  struct Direction {
    std::atomic<int64_t> dense{0};
    std::atomic<int64_t> sparse{0};
    std::atomic<int64_t> header{0};
    void Count(int64_t total, int64_t dense_bytes, int64_t sparse_bytes);
  };
  Direction sent_;
  Direction received_;
  std::atomic<int64_t> shared_sent_{0};
  std::atomic<int64_t> shared_received_{0};
};

// One process's bytes as its reports arrive (each report: its running totals since it started),
// carried across its restarts: a report below the previous one in any field means the process
// started again from zero. The coordinator keeps one per worker and per shard.
class WireBytesTally {
 public:
  // Adds what `reported` moved since the previous report.
  void Add(const v1::WireBytes& reported);
  // Starts from a saved total (a restarted coordinator): the next report is a baseline only,
  // since what the process moved between the save and it is unknown.
  void Restore(const v1::WireBytes& total);
  const v1::WireBytes& total() const { return total_; }

 private:
  v1::WireBytes total_;
  v1::WireBytes previous_;
  bool baseline_pending_ = false;
};

// The bytes of the keys and rows in `rows` (their `keys` and `values` fields).
int64_t SparseBytes(const google::protobuf::RepeatedPtrField<v1::SparseRows>& rows);

// `wire`'s fields on the wire in their declared order: sent dense, sparse, header; received
// dense, sparse, header (not the shared-memory ones).
inline constexpr int kWireBytesFields = 6;
std::array<int64_t, kWireBytesFields> WireBytesFields(const v1::WireBytes& wire);

// Every byte `wire` counts on the wire, both directions (shared memory excluded).
int64_t TotalWireBytes(const v1::WireBytes& wire);

// Bytes through the co-located plane's shared memory, both directions.
inline int64_t TotalSharedBytes(const v1::WireBytes& wire) {
  return wire.sent_shared() + wire.received_shared();
}

// How a process's dense payloads travelled, from its counts: "shm" (shared memory), "wire",
// "shm+wire" (some shards co-located, some not), or "-" before any payload moved.
const char* PayloadPath(const v1::WireBytes& wire);

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_WIRE_BYTES_H_
