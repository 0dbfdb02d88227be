#include "libs/sim/event_queue.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::sim {
namespace {

TEST(EventQueue, RunsEventsInTimeOrder) {
  EventQueue queue;
  std::vector<int> order;
  queue.At(absl::Milliseconds(30), [&] { order.push_back(3); });
  queue.At(absl::Milliseconds(10), [&] { order.push_back(1); });
  queue.At(absl::Milliseconds(20), [&] { order.push_back(2); });
  while (queue.RunNext()) {
  }
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(queue.now(), absl::Milliseconds(30));
  EXPECT_EQ(queue.executed(), 3);
}

TEST(EventQueue, BreaksTiesInSchedulingOrder) {
  EventQueue queue;
  std::string order;
  for (char c : std::string("abcdefgh")) {
    queue.At(absl::Seconds(1), [&order, c] { order.push_back(c); });
  }
  while (queue.RunNext()) {
  }
  EXPECT_EQ(order, "abcdefgh");
}

TEST(EventQueue, EventsScheduledByAnEventRunAfterItAndAfterEarlierTies) {
  EventQueue queue;
  std::vector<std::string> order;
  queue.At(absl::Seconds(1), [&] {
    order.emplace_back("first");
    // Same time as "second", scheduled later: runs after it. A time in the past means now.
    queue.After(absl::ZeroDuration(), [&] { order.emplace_back("spawned now"); });
    queue.At(absl::ZeroDuration(), [&] {
      order.emplace_back("spawned in the past");
      EXPECT_EQ(queue.now(), absl::Seconds(1));
    });
    queue.After(absl::Seconds(1), [&] { order.emplace_back("spawned later"); });
  });
  queue.At(absl::Seconds(1), [&] { order.emplace_back("second"); });
  while (queue.RunNext()) {
  }
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "spawned now",
                                             "spawned in the past", "spawned later"}));
  EXPECT_EQ(queue.now(), absl::Seconds(2));
}

TEST(EventQueue, EmptyQueueRunsNothing) {
  EventQueue queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.RunNext());
  EXPECT_EQ(queue.now(), absl::ZeroDuration());
}

TEST(VirtualClock, ReadsTheQueuesTime) {
  EventQueue queue;
  const absl::Time epoch = absl::FromUnixSeconds(1000);
  VirtualClock clock(&queue, epoch);
  EXPECT_EQ(clock.Now(), epoch);
  absl::Time seen;
  queue.At(absl::Milliseconds(250), [&] { seen = clock.Now(); });
  queue.RunNext();
  EXPECT_EQ(seen, epoch + absl::Milliseconds(250));
}

}  // namespace
}  // namespace syncopate::sim
