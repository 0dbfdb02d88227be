// Reading a metric back from a prometheus-cpp registry in unit tests.
// Thread-safety: as prometheus::Registry::Collect (thread-safe).
#ifndef SYNCOPATE_TESTS_UNIT_METRIC_VALUE_H_
#define SYNCOPATE_TESTS_UNIT_METRIC_VALUE_H_

#include <map>
#include <optional>
#include <string>

#include "prometheus/registry.h"

namespace syncopate::testing {

// Value of the counter or gauge `name` whose labels include all of `labels` (a histogram's
// sample count); nullopt if absent.
inline std::optional<double> MetricValue(prometheus::Registry& registry, const std::string& name,
                                         const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      size_t matched = 0;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        auto it = labels.find(label.name);
        if (it != labels.end() && it->second == label.value) ++matched;
      }
      if (matched != labels.size()) continue;
      if (family.type == prometheus::MetricType::Counter) return metric.counter.value;
      if (family.type == prometheus::MetricType::Gauge) return metric.gauge.value;
      if (family.type == prometheus::MetricType::Histogram) {
        return static_cast<double>(metric.histogram.sample_count);
      }
    }
  }
  return std::nullopt;
}

}  // namespace syncopate::testing

#endif  // SYNCOPATE_TESTS_UNIT_METRIC_VALUE_H_
