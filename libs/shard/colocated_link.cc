#include "libs/shard/colocated_link.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace syncopate::shard {
namespace {

constexpr size_t kCacheLine = 64;

size_t RoundUp(size_t bytes) { return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine; }

// How long the request thread sleeps in the futex before it looks at its stop flag again (Stop
// also wakes it at once).
constexpr absl::Duration kStopPoll = absl::Milliseconds(500);

}  // namespace

absl::StatusOr<std::shared_ptr<ColocatedLink>> ColocatedLink::Create(size_t dense_bytes,
                                                                     bool pushes) {
  auto link = std::shared_ptr<ColocatedLink>(new ColocatedLink());
  const size_t push_capacity = pushes ? dense_bytes : 0;
  link->pull_offset_ = RoundUp(push_capacity);
  link->request_box_offset_ = RoundUp(link->pull_offset_ + dense_bytes);
  const size_t box_bytes = rpc::SegmentMailbox::kHeaderBytes + kBoxCapacity;
  link->response_box_offset_ = RoundUp(link->request_box_offset_ + box_bytes);
  absl::StatusOr<rpc::SharedSegment> segment =
      rpc::SharedSegment::Create(link->response_box_offset_ + box_bytes);
  if (!segment.ok()) return segment.status();
  link->segment_ = *std::move(segment);
  const std::span<char> payload = link->segment_.payload();
  link->push_area_ = payload.subspan(0, push_capacity);
  link->pull_area_ = payload.subspan(link->pull_offset_, dense_bytes);
  link->requests_ = rpc::SegmentMailbox(payload.subspan(link->request_box_offset_, box_bytes));
  link->responses_ = rpc::SegmentMailbox(payload.subspan(link->response_box_offset_, box_bytes));
  return link;
}

ColocatedLink::~ColocatedLink() {
  // The last reference: either the owner's after Stop, or the thread's own as it ends.
  if (thread_.joinable()) thread_.detach();
}

void ColocatedLink::Describe(v1::SharedMemoryOffer& offer) const {
  offer.set_name(segment_.name());
  offer.set_nonce(segment_.nonce());
  offer.set_size(static_cast<int64_t>(segment_.size()));
  offer.set_push_offset(0);
  offer.set_push_capacity(static_cast<int64_t>(push_area_.size()));
  offer.set_pull_offset(static_cast<int64_t>(pull_offset_));
  offer.set_pull_capacity(static_cast<int64_t>(pull_area_.size()));
  offer.set_request_box_offset(static_cast<int64_t>(request_box_offset_));
  offer.set_response_box_offset(static_cast<int64_t>(response_box_offset_));
  offer.set_box_capacity(static_cast<int64_t>(kBoxCapacity));
}

void ColocatedLink::Serve(std::function<void(std::string_view)> request,
                          std::function<void(const absl::Status&)> broken) {
  // The sequence the thread starts from is read here, before the offer goes out: read by the
  // thread, a request posted before it first ran would count as seen and never be answered
  // (seen 2026-12-07: an evaluator's first pull waited out its 2 minutes).
  const uint32_t seen = requests_.sequence();
  thread_ = std::thread([self = shared_from_this(), seen, request = std::move(request),
                         broken = std::move(broken)] { self->ServeLoop(seen, request, broken); });
}

void ColocatedLink::ServeLoop(uint32_t seen, const std::function<void(std::string_view)>& request,
                              const std::function<void(const absl::Status&)>& broken) {
  std::string bytes;
  while (!stopping_.load(std::memory_order_acquire)) {
    const absl::Status taken = requests_.Take(seen, bytes, kStopPoll);
    if (absl::IsDeadlineExceeded(taken)) continue;
    if (!taken.ok()) {
      broken(taken);
      return;
    }
    request(bytes);
  }
}

void ColocatedLink::Stop() {
  stopping_.store(true, std::memory_order_release);
  if (requests_.valid()) requests_.Wake();
  if (!thread_.joinable()) return;
  // From the thread itself (a handler that dropped the stream's last reference): it ends on its
  // own once the handler returns, touching nothing of the link.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void ColocatedLink::Unlink() { segment_.Unlink(); }

absl::Status ColocatedLink::GradientChunks(const v1::PushRequest& push, size_t inline_bytes,
                                           tensor::ByteChunks& chunks) const {
  const int64_t bytes = push.gradient_in_segment();
  if (push_area_.empty()) {
    return absl::InvalidArgumentError(
        "the push's gradient is said to be in shared memory, but this stream has no push area");
  }
  if (bytes < 0 || static_cast<size_t>(bytes) > push_area_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the push's gradient is said to be ", bytes,
                                                   " bytes of shared memory; its area holds ",
                                                   push_area_.size()));
  }
  if (inline_bytes != 0 || push.encoding() != v1::DENSE_FLOAT32) {
    return absl::InvalidArgumentError(
        "a gradient in shared memory is float32 and has no bytes in the message");
  }
  chunks = {{push_area_.data(), static_cast<size_t>(bytes)}};
  return absl::OkStatus();
}

bool ColocatedLink::WritePullValues(std::span<const float> values) {
  if (values.size_bytes() > pull_area_.size()) return false;
  // An empty reply's data() may be null, which memcpy must never get, even for 0 bytes
  // (UBSan halted a shard on it: ADR 0022, "The sanitizer stall").
  if (values.empty()) return true;
  absl::MutexLock lock(&answer_mu_);
  std::memcpy(pull_area_.data(), values.data(), values.size_bytes());
  return true;
}

bool ColocatedLink::Answer(std::string_view message) {
  absl::MutexLock lock(&answer_mu_);
  return responses_.Post(message).ok();
}

void ColocatedLink::Notice() {
  absl::MutexLock lock(&answer_mu_);
  responses_.Post("").IgnoreError();
}

}  // namespace syncopate::shard
