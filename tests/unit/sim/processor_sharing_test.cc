#include "libs/sim/processor_sharing.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "libs/sim/event_queue.h"

namespace syncopate::sim {
namespace {

// Virtual times are multiples of 1/4 ns (absl::Duration); the arithmetic below is exact up to that.
constexpr double kTick = 1e-9;

double Now(const EventQueue& queue) { return absl::ToDoubleSeconds(queue.now()); }

void RunAll(EventQueue& queue) {
  while (queue.RunNext()) {
  }
}

TEST(ProcessorSharing, AJobAloneRunsAtFullSpeed) {
  EventQueue queue;
  ProcessorSharing cpu(&queue, 2);
  double finished = -1;
  queue.At(absl::Seconds(1), [&] { cpu.Start(0.5, [&] { finished = Now(queue); }); });
  RunAll(queue);
  EXPECT_NEAR(finished, 1.5, kTick);
  EXPECT_EQ(cpu.running(), 0);
}

TEST(ProcessorSharing, FourEqualJobsOnTwoCoresTakeTwiceTheirSoloTime) {
  // 4 jobs of 1 s on 2 cores: each runs at 2/4 of full speed, so all end at 2 s, in start order.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 2);
  std::vector<std::pair<int, double>> done;
  for (int i = 0; i < 4; ++i) {
    cpu.Start(1.0, [&, i] { done.emplace_back(i, Now(queue)); });
  }
  EXPECT_DOUBLE_EQ(cpu.Rate(), 0.5);
  RunAll(queue);
  ASSERT_EQ(done.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(done[i].first, i);
    EXPECT_NEAR(done[i].second, 2.0, kTick);
  }
}

TEST(ProcessorSharing, AsManyJobsAsCoresDoNotSlowEachOther) {
  EventQueue queue;
  ProcessorSharing cpu(&queue, 2);
  std::vector<double> done;
  cpu.Start(1.0, [&] { done.push_back(Now(queue)); });
  cpu.Start(3.0, [&] { done.push_back(Now(queue)); });
  RunAll(queue);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_NEAR(done[0], 1.0, kTick);
  EXPECT_NEAR(done[1], 3.0, kTick);
}

TEST(ProcessorSharing, AJobStartingMidwaySlowsTheOthersFromThenOn) {
  // 2 cores. A and B (1 s each) start at 0 and run at full speed until C (1 s) starts at 0.5 s.
  // From then on three share two cores (2/3 each): A and B need 0.5 s more, i.e. 0.75 s, and end
  // at 1.25 s, when C has had 0.5 s. C alone then finishes its last 0.5 s at 1.75 s. Total work
  // 3 s on 2 cores, and the cores were never idle before 1.25 s.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 2);
  std::string order;
  std::vector<double> at;
  auto job = [&](char name) {
    return [&, name] {
      order.push_back(name);
      at.push_back(Now(queue));
    };
  };
  cpu.Start(1.0, job('A'));
  cpu.Start(1.0, job('B'));
  queue.At(absl::Seconds(0.5), [&] { cpu.Start(1.0, job('C')); });
  RunAll(queue);
  EXPECT_EQ(order, "ABC");
  ASSERT_EQ(at.size(), 3u);
  EXPECT_NEAR(at[0], 1.25, kTick);
  EXPECT_NEAR(at[1], 1.25, kTick);
  EXPECT_NEAR(at[2], 1.75, kTick);
}

TEST(ProcessorSharing, ShortJobsLeaveFirstAndTheRestSpeedUp) {
  // 1 core, jobs of 1 s and 3 s from 0: both at 1/2 until the short one ends at 2 s (1 s each
  // received); the long one then has 2 s left at full speed: ends at 4 s.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 1);
  std::vector<double> at;
  cpu.Start(3.0, [&] { at.push_back(Now(queue)); });
  cpu.Start(1.0, [&] { at.push_back(Now(queue)); });
  RunAll(queue);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_NEAR(at[0], 2.0, kTick);
  EXPECT_NEAR(at[1], 4.0, kTick);
}

TEST(ProcessorSharing, ACancelledJobNeverFinishesAndFreesItsShare) {
  // 1 core, two jobs of 1 s; one is cancelled at 0.5 s (each had 0.25 s): the other has 0.75 s
  // left at full speed and ends at 1.25 s.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 1);
  bool cancelled_ran = false;
  double other = -1;
  const ProcessorSharing::JobId victim = cpu.Start(1.0, [&] { cancelled_ran = true; });
  cpu.Start(1.0, [&] { other = Now(queue); });
  queue.At(absl::Seconds(0.5), [&] { cpu.Cancel(victim); });
  RunAll(queue);
  EXPECT_FALSE(cancelled_ran);
  EXPECT_NEAR(other, 1.25, kTick);
  cpu.Cancel(victim);  // already gone: ignored
  EXPECT_EQ(cpu.running(), 0);
}

TEST(ProcessorSharing, AJobStartedByACompletionJoinsAtThatTime) {
  // Chains: each completion starts the next 0.1 s job; alone on the cores they run back to back.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 2);
  int left = 10;
  double last = -1;
  std::function<void()> next = [&] {
    last = Now(queue);
    if (--left > 0) cpu.Start(0.1, next);
  };
  cpu.Start(0.1, next);
  RunAll(queue);
  EXPECT_EQ(left, 0);
  EXPECT_NEAR(last, 1.0, 10 * kTick);
}

TEST(CpuThread, RunsItsWorkOneAtATimeInOrderWhileOtherThreadsShareTheCores) {
  // 1 core. Thread T queues X then Y (0.5 s each); a lone job Z (1 s) runs beside it. X and Z
  // share the core until X ends at 1 s (0.5 s each); Y starts then and shares with Z's last
  // 0.5 s: both end at 2 s.
  EventQueue queue;
  ProcessorSharing cpu(&queue, 1);
  CpuThread thread(&cpu);
  std::vector<std::pair<char, double>> done;
  thread.Run(0.5, [&] { done.emplace_back('X', Now(queue)); });
  thread.Run(0.5, [&] { done.emplace_back('Y', Now(queue)); });
  cpu.Start(1.0, [&] { done.emplace_back('Z', Now(queue)); });
  EXPECT_EQ(cpu.running(), 2);  // X and Z: Y waits for X
  RunAll(queue);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].first, 'X');
  EXPECT_NEAR(done[0].second, 1.0, kTick);
  EXPECT_NEAR(done[1].second, 2.0, kTick);
  EXPECT_NEAR(done[2].second, 2.0, kTick);
}

TEST(CpuThread, StopDropsTheQueueAndTheRunningPiece) {
  EventQueue queue;
  ProcessorSharing cpu(&queue, 1);
  CpuThread thread(&cpu);
  int ran = 0;
  thread.Run(1.0, [&] { ++ran; });
  thread.Run(1.0, [&] { ++ran; });
  queue.At(absl::Seconds(0.5), [&] { thread.Stop(); });
  RunAll(queue);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(cpu.running(), 0);
}

TEST(ProcessorSharing, SameStartsSameTimesBitForBit) {
  // Uneven work, starts and a cancellation: two runs agree to the last bit.
  auto run = [] {
    EventQueue queue;
    ProcessorSharing cpu(&queue, 1.5);
    std::vector<double> at;
    std::vector<ProcessorSharing::JobId> ids;
    for (int i = 0; i < 40; ++i) {
      queue.At(absl::Seconds(0.013 * i), [&, i] {
        ids.push_back(cpu.Start(0.01 * (i % 7 + 1), [&] { at.push_back(Now(queue)); }));
        if (i % 9 == 8) cpu.Cancel(ids[ids.size() - 3]);
      });
    }
    RunAll(queue);
    return at;
  };
  const std::vector<double> first = run();
  EXPECT_EQ(first, run());
  EXPECT_GT(first.size(), 30u);
}

}  // namespace
}  // namespace syncopate::sim
