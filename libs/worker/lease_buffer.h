// LeaseBuffer: the examples a worker still has to visit, from the data leases it holds, in
// visiting order, and the leases it finished (reported with its next lease request so the
// coordinator never hands them out again in this epoch).
// Thread-safety: thread-compatible (one training loop owns it).
#ifndef SYNCOPATE_LIBS_WORKER_LEASE_BUFFER_H_
#define SYNCOPATE_LIBS_WORKER_LEASE_BUFFER_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::worker {

class LeaseBuffer {
 public:
  // Appends the lease's examples (data::LeaseExampleOrder) and clears the outstanding request.
  void Add(const v1::DataLease& lease);
  // Moves the next min(n, size()) examples into `out` (replacing its content); a lease whose last
  // example is taken becomes completed.
  void Take(int64_t n, std::vector<int64_t>& out);
  int64_t size() const { return static_cast<int64_t>(order_.size()); }

  // A lease request that takes the completed lease ids along (they are reported once) and marks
  // a request as outstanding.
  v1::WorkerMessage NextRequest();
  // True between NextRequest and the next Add.
  bool request_outstanding() const { return request_outstanding_; }
  // Completed lease ids not yet reported.
  const std::vector<int64_t>& completed() const { return completed_; }

 private:
  std::deque<int64_t> order_;
  std::deque<std::pair<int64_t, int64_t>> lease_ends_;  // (lease id, examples left in it)
  std::vector<int64_t> completed_;
  bool request_outstanding_ = false;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_LEASE_BUFFER_H_
