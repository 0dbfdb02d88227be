#include "libs/rpc/segment_mailbox.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "libs/rpc/shared_segment.h"

namespace syncopate::rpc {
namespace {

constexpr size_t kCapacity = 1024;

SharedSegment NewSegment() {
  absl::StatusOr<SharedSegment> segment =
      SharedSegment::Create(SegmentMailbox::kHeaderBytes + kCapacity);
  EXPECT_TRUE(segment.ok()) << segment.status();
  return *std::move(segment);
}

TEST(SegmentMailbox, AMessagePostedIsTakenOnceWithItsBytes) {
  SharedSegment segment = NewSegment();
  SegmentMailbox box(segment.payload());
  ASSERT_TRUE(box.valid());
  EXPECT_EQ(box.capacity(), kCapacity);
  uint32_t seen = box.sequence();
  std::string out;
  EXPECT_EQ(box.Take(seen, out, absl::Milliseconds(10)).code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(box.Post("push 1").ok());
  ASSERT_TRUE(box.Take(seen, out, absl::Seconds(1)).ok());
  EXPECT_EQ(out, "push 1");
  EXPECT_EQ(box.Take(seen, out, absl::Milliseconds(10)).code(), absl::StatusCode::kDeadlineExceeded)
      << "taken once";
  EXPECT_EQ(box.Post(std::string(kCapacity + 1, 'x')).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(box.Post(std::string(kCapacity, 'y')).ok());
  ASSERT_TRUE(box.Take(seen, out, absl::Seconds(1)).ok());
  EXPECT_EQ(out.size(), kCapacity);
}

// The reader sleeps in the futex until the writer posts, from another process: the doorbell
// works across the shared mapping, and a ping-pong of 200 round trips finishes promptly.
TEST(SegmentMailbox, AnotherProcessWakesTheReaderAndAnswers) {
  SharedSegment segment = NewSegment();
  const std::span<char> payload = segment.payload();
  const size_t half = (payload.size() / 2) / 64 * 64;
  SegmentMailbox requests(payload.subspan(0, half));
  SegmentMailbox answers(payload.subspan(half));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the "shard": answers every request with its bytes reversed
    uint32_t seen = 0;
    std::string request;
    for (int answered = 0; answered < 200;) {
      if (!requests.Take(seen, request, absl::Seconds(5)).ok()) continue;
      answers.Post(std::string(request.rbegin(), request.rend())).IgnoreError();
      ++answered;
    }
    _exit(0);
  }
  uint32_t seen = 0;
  std::string answer;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(requests.Post("abc" + std::to_string(i)).ok());
    absl::Status taken;
    do {
      taken = answers.Take(seen, answer, absl::Seconds(5));
    } while (absl::IsDeadlineExceeded(taken) && absl::Now() - start < absl::Seconds(30));
    ASSERT_TRUE(taken.ok()) << taken;
    const std::string expected = "abc" + std::to_string(i);
    EXPECT_EQ(answer, std::string(expected.rbegin(), expected.rend()));
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SegmentMailbox, WakeReleasesAWaitingReaderWithoutAMessage) {
  SharedSegment segment = NewSegment();
  SegmentMailbox box(segment.payload());
  uint32_t seen = box.sequence();
  std::string out;
  absl::Status taken;
  std::thread reader([&] { taken = box.Take(seen, out, absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time woken = absl::Now();
  box.Wake();
  reader.join();
  EXPECT_EQ(taken.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - woken, absl::Seconds(5));
}

// A writer that lies about the length (another process may write anything) is refused, and the
// message counts as taken.
TEST(SegmentMailbox, ALengthBeyondTheCapacityIsDataLoss) {
  SharedSegment segment = NewSegment();
  SegmentMailbox box(segment.payload());
  uint32_t seen = box.sequence();
  ASSERT_TRUE(box.Post("ok").ok());
  const uint64_t lie = kCapacity * 10;
  std::memcpy(segment.payload().data() + 8, &lie, sizeof(lie));
  std::string out;
  EXPECT_EQ(box.Take(seen, out, absl::Seconds(1)).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(box.Take(seen, out, absl::Milliseconds(10)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace syncopate::rpc
