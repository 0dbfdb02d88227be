// The Prometheus side of v1::WireBytes: series {direction="sent|received",
// part="dense|sparse|header"} of a counter family, advanced to a process's running totals
// (rpc::WireBytesCounter); shared by the worker (syncopate_worker_wire_bytes_total) and the shard
// (syncopate_shard_wire_bytes_total), which register the family (docs/metrics.md's check finds
// names where they are registered). Bytes per example on a dashboard:
// rate(<name>[1m]) / rate(syncopate_worker_examples_total[1m]).
// Thread-safety: thread-safe.
#ifndef SYNCOPATE_LIBS_METRICS_WIRE_BYTES_METRICS_H_
#define SYNCOPATE_LIBS_METRICS_WIRE_BYTES_METRICS_H_

#include <array>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "libs/rpc/wire_bytes.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::metrics {

class WireBytesMetrics {
 public:
  // `labels` are added to every series (the shard's `shard`). `family` must outlive this.
  explicit WireBytesMetrics(prometheus::Family<prometheus::Counter>& family,
                            const prometheus::Labels& labels = {});

  // Advances the counters to `totals`, the process's running totals; a total below the last
  // one seen (never, for one process's counter) leaves its counter where it is.
  void Update(const v1::WireBytes& totals);

 private:
  // In rpc::WireBytesFields' order.
  std::array<prometheus::Counter*, rpc::kWireBytesFields> counters_;
  absl::Mutex mu_;
  std::array<int64_t, rpc::kWireBytesFields> last_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace syncopate::metrics

#endif  // SYNCOPATE_LIBS_METRICS_WIRE_BYTES_METRICS_H_
