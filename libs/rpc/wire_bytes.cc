#include "libs/rpc/wire_bytes.h"

#include <algorithm>
#include <array>

namespace syncopate::rpc {

void WireBytesCounter::Direction::Count(int64_t total, int64_t dense_bytes, int64_t sparse_bytes) {
  dense.fetch_add(dense_bytes, std::memory_order_relaxed);
  sparse.fetch_add(sparse_bytes, std::memory_order_relaxed);
  // A message is never smaller than its parts; the max keeps a miscount from going negative.
  header.fetch_add(std::max<int64_t>(0, total - dense_bytes - sparse_bytes),
                   std::memory_order_relaxed);
}

void WireBytesCounter::CountSent(int64_t total, int64_t dense, int64_t sparse) {
  sent_.Count(total, dense, sparse);
}

void WireBytesCounter::CountReceived(int64_t total, int64_t dense, int64_t sparse) {
  received_.Count(total, dense, sparse);
}

v1::WireBytes WireBytesCounter::Totals() const {
  v1::WireBytes totals;
  totals.set_sent_dense(sent_.dense.load(std::memory_order_relaxed));
  totals.set_sent_sparse(sent_.sparse.load(std::memory_order_relaxed));
  totals.set_sent_header(sent_.header.load(std::memory_order_relaxed));
  totals.set_received_dense(received_.dense.load(std::memory_order_relaxed));
  totals.set_received_sparse(received_.sparse.load(std::memory_order_relaxed));
  totals.set_received_header(received_.header.load(std::memory_order_relaxed));
  totals.set_sent_shared(shared_sent_.load(std::memory_order_relaxed));
  totals.set_received_shared(shared_received_.load(std::memory_order_relaxed));
  return totals;
}

namespace {

// Every field, the wire's and the shared memory's: what a tally carries across restarts.
constexpr int kFields = kWireBytesFields + 2;

std::array<int64_t, kFields> AllFields(const v1::WireBytes& w) {
  return {w.sent_dense(),      w.sent_sparse(),     w.sent_header(), w.received_dense(),
          w.received_sparse(), w.received_header(), w.sent_shared(), w.received_shared()};
}

v1::WireBytes FromFields(const std::array<int64_t, kFields>& f) {
  v1::WireBytes w;
  w.set_sent_dense(f[0]);
  w.set_sent_sparse(f[1]);
  w.set_sent_header(f[2]);
  w.set_received_dense(f[3]);
  w.set_received_sparse(f[4]);
  w.set_received_header(f[5]);
  w.set_sent_shared(f[6]);
  w.set_received_shared(f[7]);
  return w;
}

}  // namespace

void WireBytesTally::Add(const v1::WireBytes& reported) {
  const std::array<int64_t, kFields> now = AllFields(reported);
  const std::array<int64_t, kFields> before = AllFields(previous_);
  std::array<int64_t, kFields> total = AllFields(total_);
  bool restarted = false;
  for (int i = 0; i < kFields; ++i) restarted = restarted || now[i] < before[i];
  if (!baseline_pending_) {
    for (int i = 0; i < kFields; ++i) total[i] += restarted ? now[i] : now[i] - before[i];
  }
  baseline_pending_ = false;
  total_ = FromFields(total);
  previous_ = reported;
}

void WireBytesTally::Restore(const v1::WireBytes& total) {
  total_ = total;
  previous_.Clear();
  baseline_pending_ = true;
}

std::array<int64_t, kWireBytesFields> WireBytesFields(const v1::WireBytes& w) {
  return {w.sent_dense(),     w.sent_sparse(),     w.sent_header(),
          w.received_dense(), w.received_sparse(), w.received_header()};
}

int64_t SparseBytes(const google::protobuf::RepeatedPtrField<v1::SparseRows>& rows) {
  int64_t bytes = 0;
  for (const v1::SparseRows& table : rows) {
    bytes += static_cast<int64_t>(table.keys().size() + table.values().size());
  }
  return bytes;
}

int64_t TotalWireBytes(const v1::WireBytes& wire) {
  int64_t total = 0;
  for (const int64_t bytes : WireBytesFields(wire)) total += bytes;
  return total;
}

const char* PayloadPath(const v1::WireBytes& wire) {
  const bool shared = TotalSharedBytes(wire) > 0;
  const bool on_wire = wire.sent_dense() + wire.received_dense() > 0;
  if (shared && on_wire) return "shm+wire";
  if (shared) return "shm";
  return on_wire ? "wire" : "-";
}

}  // namespace syncopate::rpc
