#include "transforms/loop_trip_count.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(LoopTripCountTest, OrdinaryLoops) {
  EXPECT_EQ(LoopTripCount(0, 4, 1), 4u);
  EXPECT_EQ(LoopTripCount(0, 7, 2), 4u);
  EXPECT_EQ(LoopTripCount(-3, 3, 3), 2u);
  EXPECT_EQ(LoopTripCount(5, 5, 1), 0u);
  EXPECT_EQ(LoopTripCount(5, 4, 1), 0u);
  EXPECT_EQ(LoopTripCount(0, 4, 0), 0u);
  EXPECT_EQ(LoopTripCount(0, 4, -1), 0u);
}

TEST(LoopTripCountTest, BoundsNearTheInt64Limits) {
  EXPECT_EQ(LoopTripCount(kMax - 1, kMax, 2), 1u);
  EXPECT_EQ(LoopTripCount(kMax - 1, kMax, kMax), 1u);
  EXPECT_EQ(LoopTripCount(-10, kMax, kMax), 2u);
  EXPECT_EQ(LoopTripCount(kMin, kMax, int64_t{1} << 62), 4u);
  EXPECT_EQ(LoopTripCount(kMin, kMax, 1), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(LoopTripCount(kMin, kMax, kMax), 3u);
  EXPECT_EQ(LoopTripCount(kMax, kMin, 1), 0u);
}

TEST(LoopTripCountTest, CheckedArithmetic) {
  EXPECT_EQ(CheckedMultiply(3, 4), 12);
  EXPECT_EQ(CheckedMultiply(0, std::numeric_limits<uint64_t>::max()), 0);
  EXPECT_EQ(CheckedMultiply(1, static_cast<uint64_t>(kMax)), kMax);
  EXPECT_EQ(CheckedMultiply(1, static_cast<uint64_t>(kMax) + 1), std::nullopt);
  EXPECT_EQ(CheckedMultiply(int64_t{1} << 32, uint64_t{1} << 30), int64_t{1} << 62);
  EXPECT_EQ(CheckedMultiply(int64_t{1} << 32, uint64_t{1} << 31), std::nullopt);
  EXPECT_EQ(CheckedMultiply(int64_t{1} << 32, uint64_t{1} << 32), std::nullopt);
  EXPECT_EQ(CheckedAdd(kMax, 0), kMax);
  EXPECT_EQ(CheckedAdd(kMax, 1), std::nullopt);
}

}  // namespace
}  // namespace commir
