// Prometheus metrics over HTTP (prometheus-cpp Exposer): one registry per process, served
// read-only at /metrics.
// Thread-safety: thread-safe (prometheus-cpp metrics are).
#ifndef SYNCOPATE_LIBS_METRICS_METRICS_SERVER_H_
#define SYNCOPATE_LIBS_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/metrics/buckets.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace syncopate::metrics {

class MetricsServer {
 public:
  // `bind_address` is "host:port"; port 0 picks a free one (see port()).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& bind_address);

  prometheus::Registry& registry() { return *registry_; }
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace syncopate::metrics

#endif  // SYNCOPATE_LIBS_METRICS_METRICS_SERVER_H_
