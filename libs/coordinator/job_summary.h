// One paragraph that says how a job ended, for places that outlive the coordinator process: a
// Kubernetes termination message (`kubectl get pod -o jsonpath='{..terminated.message}'`, at most
// 4 KiB), the last log line, a batch system's job record.
// Thread-safety: a pure function.
#ifndef SYNCOPATE_LIBS_COORDINATOR_JOB_SUMMARY_H_
#define SYNCOPATE_LIBS_COORDINATOR_JOB_SUMMARY_H_

#include <string>

#include "syncopate/v1/cluster.pb.h"

namespace syncopate::coordinator {

// E.g. "job fashion-mnist-mlp JOB_DONE after 92.3 s: 480000 examples (8.00 epochs), 4 workers,
// 2 shards; final evaluation: accuracy 87.12%, AUC 0.9891, loss 0.3612". Without an evaluation:
// "...; no evaluation". Well under 4 KiB whatever the cluster's size.
std::string JobSummary(const v1::ClusterStatus& status);

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_JOB_SUMMARY_H_
