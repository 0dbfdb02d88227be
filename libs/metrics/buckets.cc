#include "libs/metrics/buckets.h"

namespace syncopate::metrics {

prometheus::Histogram::BucketBoundaries SecondsBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double b = 1e-4; b < 200; b *= 2.5) buckets.push_back(b);
  return buckets;
}

}  // namespace syncopate::metrics
