#include "libs/worker/lease_buffer.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::DataLease Lease(int64_t id, int64_t begin, int64_t end) {
  v1::DataLease lease;
  lease.set_lease_id(id);
  lease.set_begin(begin);
  lease.set_end(end);
  lease.set_shuffle_seed(11);
  return lease;
}

// Two leases of 4 and 3 examples taken 3 at a time: the first completes inside the second take,
// the second with the third; every example once, each lease's examples together.
TEST(LeaseBuffer, TakesInOrderAndCompletesLeasesAsTheirLastExampleIsTaken) {
  LeaseBuffer buffer;
  buffer.Add(Lease(1, 0, 4));
  buffer.Add(Lease(2, 10, 13));
  EXPECT_EQ(buffer.size(), 7);
  std::vector<int64_t> batch;
  std::set<int64_t> seen;
  buffer.Take(3, batch);
  EXPECT_EQ(batch.size(), 3u);
  for (int64_t e : batch) EXPECT_LT(e, 4);
  seen.insert(batch.begin(), batch.end());
  EXPECT_THAT(buffer.completed(), IsEmpty());
  buffer.Take(3, batch);
  seen.insert(batch.begin(), batch.end());
  EXPECT_THAT(buffer.completed(), ElementsAre(1));
  buffer.Take(3, batch);  // only one left
  EXPECT_EQ(batch.size(), 1u);
  seen.insert(batch.begin(), batch.end());
  EXPECT_THAT(buffer.completed(), ElementsAre(1, 2));
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3, 10, 11, 12}));
  EXPECT_EQ(buffer.size(), 0);
}

TEST(LeaseBuffer, ARequestCarriesTheCompletedLeasesOnceAndIsOutstandingUntilALease) {
  LeaseBuffer buffer;
  EXPECT_FALSE(buffer.request_outstanding());
  buffer.Add(Lease(5, 0, 2));
  std::vector<int64_t> batch;
  buffer.Take(2, batch);
  v1::WorkerMessage first = buffer.NextRequest();
  EXPECT_TRUE(first.has_lease_request());
  EXPECT_THAT(first.lease_request().completed_lease_ids(), ElementsAre(5));
  EXPECT_TRUE(buffer.request_outstanding());
  EXPECT_THAT(buffer.NextRequest().lease_request().completed_lease_ids(), IsEmpty());
  buffer.Add(Lease(6, 2, 4));
  EXPECT_FALSE(buffer.request_outstanding());
}

}  // namespace
}  // namespace syncopate::worker
