// Histogram bucket boundaries shared by every process's metrics, apart from the HTTP exposer
// (metrics_server.h) so a library that defines metrics does not link a web server.
// Thread-safety: pure functions; thread-safe.
#ifndef SYNCOPATE_LIBS_METRICS_BUCKETS_H_
#define SYNCOPATE_LIBS_METRICS_BUCKETS_H_

#include "prometheus/histogram.h"

namespace syncopate::metrics {

// Histogram buckets for durations in seconds, 100 µs to ~100 s: spans a sub-millisecond apply
// and a barrier held up by a straggler.
prometheus::Histogram::BucketBoundaries SecondsBuckets();

}  // namespace syncopate::metrics

#endif  // SYNCOPATE_LIBS_METRICS_BUCKETS_H_
