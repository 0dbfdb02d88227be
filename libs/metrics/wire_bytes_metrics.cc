#include "libs/metrics/wire_bytes_metrics.h"

namespace syncopate::metrics {

WireBytesMetrics::WireBytesMetrics(prometheus::Family<prometheus::Counter>& family,
                                   const prometheus::Labels& labels) {
  size_t i = 0;  // rpc::WireBytesFields' order
  for (const char* direction : {"sent", "received"}) {
    for (const char* part : {"dense", "sparse", "header"}) {
      prometheus::Labels series = labels;
      series["direction"] = direction;
      series["part"] = part;
      counters_[i++] = &family.Add(series);
    }
  }
}

void WireBytesMetrics::Update(const v1::WireBytes& totals) {
  const std::array<int64_t, rpc::kWireBytesFields> now = rpc::WireBytesFields(totals);
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] > last_[i]) {
      counters_[i]->Increment(static_cast<double>(now[i] - last_[i]));
      last_[i] = now[i];
    }
  }
}

}  // namespace syncopate::metrics
