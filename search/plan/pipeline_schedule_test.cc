#include "search/plan/pipeline_schedule.h"

#include <map>
#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace commir::search::plan {
namespace {

std::string Order(int64_t pp, int64_t v, int64_t m, int64_t rank) {
  return DescribeSchedule(OneFOneBSchedule(pp, v, m, rank), v);
}

TEST(OneFOneB, WarmUpSteadyStateCoolDown) {
  EXPECT_EQ(Order(2, 1, 4, 0), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(Order(2, 1, 4, 1), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(Order(4, 1, 2, 0), "F0 F1 B0 B1");  // warm-up capped by the micro-batches
  EXPECT_EQ(Order(1, 1, 3, 0), "F0 B0 F1 B1 F2 B2");
}

// Megatron-LM's interleaved order for pp = 2, v = 2, 4 micro-batches: rank 0 warms up
// with (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards, chunks taken pp micro-batches at a
// time, backwards in reverse chunk order.
TEST(OneFOneB, InterleavedFollowsMegatron) {
  EXPECT_EQ(Order(2, 2, 4, 0),
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 "
            "B2.2 B3.2 B2.0 B3.0");
  // Rank 1 warms up with 2: (2 - 1 - 1) x 2 + (2 - 1) x 2.
  EXPECT_EQ(Order(2, 2, 4, 1),
            "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 "
            "F3.3 B3.3 B2.1 B3.1");
}

TEST(AllForwardAllBackward, ForwardsThenBackwardsInReverseChunkOrder) {
  EXPECT_EQ(DescribeSchedule(AllForwardAllBackwardSchedule(2, 1, 3, 1), 1), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(DescribeSchedule(AllForwardAllBackwardSchedule(2, 2, 2, 0), 2),
            "F0.0 F1.0 F0.2 F1.2 B0.2 B1.2 B0.0 B1.0");
}

// Every (chunk, micro-batch) runs forward once and backward once, its forward first, on
// the rank that holds the chunk.
TEST(OneFOneB, EveryStepOnceForwardBeforeBackward) {
  for (int64_t pp : {1, 2, 3, 4}) {
    for (int64_t v : {1, 2, 3}) {
      if (pp == 1 && v > 1) continue;
      for (int64_t m : {pp, 2 * pp, 3 * pp}) {
        std::set<std::pair<int64_t, int64_t>> forwards, backwards;
        for (int64_t r = 0; r < pp; ++r) {
          for (const PipelineStep& s : OneFOneBSchedule(pp, v, m, r)) {
            EXPECT_EQ(s.chunk % pp, r);
            const std::pair<int64_t, int64_t> key{s.chunk, s.microbatch};
            if (s.forward) {
              EXPECT_TRUE(forwards.insert(key).second);
            } else {
              EXPECT_TRUE(forwards.count(key)) << "backward before forward";
              EXPECT_TRUE(backwards.insert(key).second);
            }
          }
        }
        EXPECT_EQ(forwards.size(), static_cast<size_t>(pp * v * m));
        EXPECT_EQ(backwards.size(), static_cast<size_t>(pp * v * m));
      }
    }
  }
}

}  // namespace
}  // namespace commir::search::plan
