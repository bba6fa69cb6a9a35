#include "transforms/collectives/collective_buckets.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::collectives {
namespace {

using ::testing::ElementsAre;

constexpr double kMiB = 1 << 20;

// A backward pass's gradient all_reduces: each operand is made in turn (positions 0..3)
// and every result is first read by the optimizer after the backward (positions 10..13).
// All four can run at one point, after the last gradient: one bucket.
TEST(AssignBucketsTest, GradientsReadAfterTheBackwardShareOneBucket) {
  std::vector<BucketCandidate> c = {
      {0, 10, kMiB, 1}, {1, 11, kMiB, 1}, {2, 12, kMiB, 1}, {3, 13, kMiB, 1}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_THAT(b[0].members, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(b[0].after, 3);
  EXPECT_EQ(b[0].needed, 10);
  EXPECT_DOUBLE_EQ(b[0].bytes, 4 * kMiB);
}

// A forward pass's tensor-parallel all_reduces: each result is read right after it is
// made (the next layer needs it), so no two can run at one point.
TEST(AssignBucketsTest, AllReducesReadBeforeTheNextIsReadyStayApart) {
  std::vector<BucketCandidate> c = {{0, 1, kMiB, 1}, {2, 3, kMiB, 1}, {4, 5, kMiB, 1}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_THAT(b[0].members, ElementsAre(0));
  EXPECT_THAT(b[1].members, ElementsAre(1));
  EXPECT_THAT(b[2].members, ElementsAre(2));
}

// 10 gradients of 10 MiB under a 25 MiB threshold: buckets of two (DDP's bucket_cap_mb
// closes a bucket when the next gradient would overflow it): 5 buckets.
TEST(AssignBucketsTest, TheThresholdClosesFullBuckets) {
  std::vector<BucketCandidate> c;
  for (int i = 0; i < 10; ++i) c.push_back({i, 20 + i, 10 * kMiB, 7});
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 5u);
  for (size_t k = 0; k < b.size(); ++k) {
    EXPECT_THAT(b[k].members, ElementsAre(2 * k, 2 * k + 1));
    EXPECT_DOUBLE_EQ(b[k].bytes, 20 * kMiB);
  }
}

// One collective larger than the threshold still runs, alone; the next starts a bucket.
TEST(AssignBucketsTest, OneCollectiveOverTheThresholdGoesAlone) {
  std::vector<BucketCandidate> c = {{0, 10, 30 * kMiB, 1}, {1, 10, kMiB, 1}, {2, 10, kMiB, 1}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_THAT(b[0].members, ElementsAre(0));
  EXPECT_THAT(b[1].members, ElementsAre(1, 2));
}

// Different keys (another mesh axis, another element type) never share a bucket, and a
// bucket of one key stays open across candidates of another.
TEST(AssignBucketsTest, KeysAreBucketedApart) {
  std::vector<BucketCandidate> c = {
      {0, 10, kMiB, 1}, {1, 10, kMiB, 2}, {2, 10, kMiB, 1}, {3, 10, kMiB, 2}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_THAT(b[0].members, ElementsAre(0, 2));
  EXPECT_THAT(b[1].members, ElementsAre(1, 3));
}

// Interval stabbing: [0,4) [1,2) [3,6) [5,7): the earliest deadline (2) takes the first
// two; the third's operand is ready at 3, after that deadline, so it opens a bucket with
// the fourth (ready 5 < 6). Two buckets, the fewest points that stab all four.
TEST(AssignBucketsTest, EarliestDeadlineGreedyNeedsTheFewestBuckets) {
  std::vector<BucketCandidate> c = {{0, 4, 1, 1}, {1, 2, 1, 1}, {3, 6, 1, 1}, {5, 7, 1, 1}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_THAT(b[0].members, ElementsAre(0, 1));
  EXPECT_EQ(b[0].after, 1);
  EXPECT_EQ(b[0].needed, 2);
  EXPECT_THAT(b[1].members, ElementsAre(2, 3));
  EXPECT_EQ(b[1].after, 5);
  EXPECT_EQ(b[1].needed, 6);
}

// A candidate whose operand is made at or after its first reader cannot be moved; it
// goes alone and leaves the open bucket open.
TEST(AssignBucketsTest, MalformedCandidatesGoAlone) {
  std::vector<BucketCandidate> c = {{0, 10, 1, 1}, {5, 5, 1, 1}, {2, 10, 1, 1}};
  std::vector<Bucket> b = AssignBuckets(c, 25 * kMiB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_THAT(b[0].members, ElementsAre(0, 2));
  EXPECT_THAT(b[1].members, ElementsAre(1));
}

TEST(AssignBucketsTest, NoCandidatesNoBuckets) {
  EXPECT_TRUE(AssignBuckets({}, 25 * kMiB).empty());
}

}  // namespace
}  // namespace commir::collectives
