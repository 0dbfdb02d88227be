#include "libs/shard/colocated_link.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/rpc/segment_mailbox.h"
#include "libs/rpc/shared_segment.h"

namespace syncopate::shard {
namespace {

// The worker's side of a link, as ParameterClient maps it from the offer.
struct WorkerView {
  rpc::SharedSegment segment;
  rpc::SegmentMailbox requests;
  rpc::SegmentMailbox responses;
  std::span<char> push_area;
  std::span<char> pull_area;
};

WorkerView Map(const ColocatedLink& link) {
  v1::SharedMemoryOffer offer;
  link.Describe(offer);
  WorkerView view;
  absl::StatusOr<rpc::SharedSegment> segment =
      rpc::SharedSegment::Open(offer.name(), static_cast<size_t>(offer.size()), offer.nonce());
  EXPECT_TRUE(segment.ok()) << segment.status();
  view.segment = *std::move(segment);
  const std::span<char> payload = view.segment.payload();
  const auto box = rpc::SegmentMailbox::kHeaderBytes + static_cast<size_t>(offer.box_capacity());
  view.requests =
      rpc::SegmentMailbox(payload.subspan(static_cast<size_t>(offer.request_box_offset()), box));
  view.responses =
      rpc::SegmentMailbox(payload.subspan(static_cast<size_t>(offer.response_box_offset()), box));
  view.push_area = payload.subspan(static_cast<size_t>(offer.push_offset()),
                                   static_cast<size_t>(offer.push_capacity()));
  view.pull_area = payload.subspan(static_cast<size_t>(offer.pull_offset()),
                                   static_cast<size_t>(offer.pull_capacity()));
  return view;
}

// A worker posts its first request the moment it has the offer, which can be before the link's
// thread first runs: that request must be served (it once counted as seen and the worker waited
// out its 2-minute timeout). Many links, each posted to at once, make the late thread likely.
TEST(ColocatedLink, ARequestPostedBeforeTheThreadFirstRunsIsServed) {
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<std::shared_ptr<ColocatedLink>> link = ColocatedLink::Create(4096, true);
    ASSERT_TRUE(link.ok()) << link.status();
    absl::Notification served;
    std::string got;
    (*link)->Serve(
        [&](std::string_view request) {
          got = std::string(request);
          served.Notify();
        },
        [](const absl::Status&) {});
    WorkerView worker = Map(**link);
    ASSERT_TRUE(worker.requests.Post("first").ok());
    ASSERT_TRUE(served.WaitForNotificationWithTimeout(absl::Seconds(10))) << "link " << i;
    EXPECT_EQ(got, "first");
    (*link)->Stop();
  }
}

// The areas and the answer path: a push's gradient read where the worker wrote it, pull values
// written where the worker reads them, an answer in the response box, and an empty answer when
// it does not fit; refusals of a gradient said to be where it cannot be.
TEST(ColocatedLink, AreasAndAnswersAreWhereTheOfferSays) {
  absl::StatusOr<std::shared_ptr<ColocatedLink>> link = ColocatedLink::Create(64, true);
  ASSERT_TRUE(link.ok());
  WorkerView worker = Map(**link);
  ASSERT_EQ(worker.push_area.size(), 64u);
  ASSERT_EQ(worker.pull_area.size(), 64u);
  const std::vector<float> gradient = {1, 2, 3, 4};
  std::memcpy(worker.push_area.data(), gradient.data(), 16);
  v1::PushRequest push;
  push.set_gradient_in_segment(16);
  tensor::ByteChunks chunks;
  ASSERT_TRUE((*link)->GradientChunks(push, 0, chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(std::memcmp(chunks[0].data(), gradient.data(), 16), 0);
  push.set_gradient_in_segment(65);
  EXPECT_EQ((*link)->GradientChunks(push, 0, chunks).code(), absl::StatusCode::kInvalidArgument);
  push.set_gradient_in_segment(16);
  EXPECT_EQ((*link)->GradientChunks(push, 8, chunks).code(), absl::StatusCode::kInvalidArgument)
      << "bytes in the message too";
  push.set_encoding(v1::DENSE_BFLOAT16);
  EXPECT_EQ((*link)->GradientChunks(push, 0, chunks).code(), absl::StatusCode::kInvalidArgument);

  const std::vector<float> values = {5, 6, 7};
  ASSERT_TRUE((*link)->WritePullValues(values));
  EXPECT_EQ(std::memcmp(worker.pull_area.data(), values.data(), 12), 0);
  EXPECT_FALSE((*link)->WritePullValues(std::vector<float>(17, 0.0f)));

  uint32_t seen = worker.responses.sequence();
  std::string answer;
  ASSERT_TRUE((*link)->Answer("ack"));
  ASSERT_TRUE(worker.responses.Take(seen, answer, absl::Seconds(1)).ok());
  EXPECT_EQ(answer, "ack");
  EXPECT_FALSE((*link)->Answer(std::string(ColocatedLink::kBoxCapacity + 1, 'x')));
  (*link)->Notice();
  ASSERT_TRUE(worker.responses.Take(seen, answer, absl::Seconds(1)).ok());
  EXPECT_TRUE(answer.empty()) << "the notice: answered on the stream";

  absl::StatusOr<std::shared_ptr<ColocatedLink>> evaluator = ColocatedLink::Create(64, false);
  ASSERT_TRUE(evaluator.ok());
  EXPECT_EQ((*evaluator)->GradientChunks(push, 0, chunks).code(),
            absl::StatusCode::kInvalidArgument)
      << "an evaluator's link has no push area";
}

}  // namespace
}  // namespace syncopate::shard
