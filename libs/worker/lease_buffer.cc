#include "libs/worker/lease_buffer.h"

#include <algorithm>

#include "libs/data/lease_table.h"

namespace syncopate::worker {

void LeaseBuffer::Add(const v1::DataLease& lease) {
  std::vector<int64_t> examples = data::LeaseExampleOrder(lease);
  order_.insert(order_.end(), examples.begin(), examples.end());
  lease_ends_.emplace_back(lease.lease_id(), static_cast<int64_t>(examples.size()));
  request_outstanding_ = false;
}

void LeaseBuffer::Take(int64_t n, std::vector<int64_t>& out) {
  n = std::min(n, size());
  out.assign(order_.begin(), order_.begin() + n);
  order_.erase(order_.begin(), order_.begin() + n);
  while (n > 0 && !lease_ends_.empty()) {
    const int64_t used = std::min(n, lease_ends_.front().second);
    lease_ends_.front().second -= used;
    n -= used;
    if (lease_ends_.front().second == 0) {
      completed_.push_back(lease_ends_.front().first);
      lease_ends_.pop_front();
    }
  }
}

v1::WorkerMessage LeaseBuffer::NextRequest() {
  v1::WorkerMessage request;
  v1::LeaseRequest* lease_request = request.mutable_lease_request();
  for (int64_t id : completed_) lease_request->add_completed_lease_ids(id);
  completed_.clear();
  request_outstanding_ = true;
  return request;
}

}  // namespace syncopate::worker
