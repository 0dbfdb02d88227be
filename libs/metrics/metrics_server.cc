#include "libs/metrics/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace syncopate::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& bind_address) {
  auto server = std::unique_ptr<MetricsServer>(new MetricsServer());
  server->registry_ = std::make_shared<prometheus::Registry>();
  try {
    // civetweb reports a busy or invalid address by throwing; keep exceptions at this edge.
    server->exposer_ = std::make_unique<prometheus::Exposer>(bind_address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", bind_address, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->registry_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->port_ = ports.empty() ? 0 : ports.front();
  return server;
}

}  // namespace syncopate::metrics
