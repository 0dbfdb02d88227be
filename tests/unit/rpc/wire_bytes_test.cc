#include "libs/rpc/wire_bytes.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::rpc {
namespace {

v1::WireBytes Wire(int64_t sent_dense, int64_t received_dense) {
  v1::WireBytes w;
  w.set_sent_dense(sent_dense);
  w.set_received_dense(received_dense);
  return w;
}

TEST(WireBytesCounter, SplitsEachMessageIntoDenseSparseAndHeader) {
  WireBytesCounter counter;
  counter.CountSent(1000, 900, 60);
  counter.CountSent(20, 0, 0);
  counter.CountReceived(500, 0, 480);
  const v1::WireBytes totals = counter.Totals();
  EXPECT_EQ(totals.sent_dense(), 900);
  EXPECT_EQ(totals.sent_sparse(), 60);
  EXPECT_EQ(totals.sent_header(), 60);
  EXPECT_EQ(totals.received_dense(), 0);
  EXPECT_EQ(totals.received_sparse(), 480);
  EXPECT_EQ(totals.received_header(), 20);
  EXPECT_EQ(TotalWireBytes(totals), 1520);
}

TEST(WireBytesCounter, CountsFromManyThreadsExactly) {
  WireBytesCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.CountReceived(10, 4, 2);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.Totals().received_dense(), 160000);
  EXPECT_EQ(counter.Totals().received_header(), 160000);
}

TEST(SparseBytes, CountsKeysAndValues) {
  google::protobuf::RepeatedPtrField<v1::SparseRows> rows;
  v1::SparseRows* a = rows.Add();
  a->set_keys(std::string(16, 'k'));
  a->set_values(std::string(64, 'v'));
  v1::SparseRows* b = rows.Add();
  b->set_table(1);
  b->set_keys(std::string(8, 'k'));
  EXPECT_EQ(SparseBytes(rows), 88);
}

TEST(WireBytesTally, AddsWhatEachReportMovedSinceTheLast) {
  WireBytesTally tally;
  tally.Add(Wire(100, 200));
  tally.Add(Wire(150, 260));
  EXPECT_EQ(tally.total().sent_dense(), 150);
  EXPECT_EQ(tally.total().received_dense(), 260);
}

TEST(WireBytesTally, AProcessThatStartedAgainCountsFromZero) {
  WireBytesTally tally;
  tally.Add(Wire(100, 200));
  tally.Add(Wire(30, 40));  // a restarted process: below the last report
  EXPECT_EQ(tally.total().sent_dense(), 130);
  EXPECT_EQ(tally.total().received_dense(), 240);
}

TEST(WireBytesTally, ARestoredTotalTakesTheNextReportAsItsBaseline) {
  WireBytesTally tally;
  tally.Restore(Wire(1000, 2000));
  tally.Add(Wire(500, 500));  // what the process moved before this report is in the saved total
  EXPECT_EQ(tally.total().sent_dense(), 1000);
  tally.Add(Wire(600, 700));
  EXPECT_EQ(tally.total().sent_dense(), 1100);
  EXPECT_EQ(tally.total().received_dense(), 2200);
}

// Payloads through the co-located plane are counted apart: never as wire bytes, carried across
// restarts like the rest, and they name the path a process's payloads took.
TEST(WireBytesCounter, SharedMemoryBytesAreNotWireBytes) {
  WireBytesCounter counter;
  EXPECT_STREQ(PayloadPath(counter.Totals()), "-");
  counter.CountSent(40, 0, 0);  // a push whose gradient is in the segment: only its header
  counter.CountSharedSent(900);
  counter.CountSharedReceived(800);
  const v1::WireBytes totals = counter.Totals();
  EXPECT_EQ(TotalWireBytes(totals), 40);
  EXPECT_EQ(TotalSharedBytes(totals), 1700);
  EXPECT_STREQ(PayloadPath(totals), "shm");
  counter.CountReceived(600, 500, 0);  // a second shard, on another host
  EXPECT_STREQ(PayloadPath(counter.Totals()), "shm+wire");
  EXPECT_STREQ(PayloadPath(Wire(10, 0)), "wire");

  WireBytesTally tally;
  tally.Add(totals);
  v1::WireBytes restarted;
  restarted.set_sent_shared(100);
  tally.Add(restarted);
  EXPECT_EQ(tally.total().sent_shared(), 1000);
  EXPECT_EQ(tally.total().received_shared(), 800);
}

}  // namespace
}  // namespace syncopate::rpc
