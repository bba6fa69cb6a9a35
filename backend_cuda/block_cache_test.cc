#include "backend_cuda/block_cache.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace commir::cuda {
namespace {

// Fences are numbers; the test decides which have completed and counts the queries.
struct FakeFences {
  absl::flat_hash_set<uintptr_t> completed;
  std::vector<uintptr_t> asked;
  BlockCache::FenceDone callback() {
    return [this](uintptr_t fence) {
      asked.push_back(fence);
      return completed.contains(fence);
    };
  }
};

TEST(BlockCacheTest, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(BlockCache::RoundSize(0), 512u);
  EXPECT_EQ(BlockCache::RoundSize(1), 512u);
  EXPECT_EQ(BlockCache::RoundSize(512), 512u);
  EXPECT_EQ(BlockCache::RoundSize(513), 1024u);
  EXPECT_EQ(BlockCache::RoundSize((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(BlockCache::RoundSize(1u << 20), 2u << 20);
  EXPECT_EQ(BlockCache::RoundSize((2u << 20) + 1), 4u << 20);
}

TEST(BlockCacheTest, ReusesOnlyOnTheOwningStream) {
  BlockCache cache;
  FakeFences fences;
  cache.Give({0x1000, 1024, /*stream=*/7}, {});
  EXPECT_FALSE(cache.Take(1000, /*stream=*/8, fences.callback()).has_value());
  std::optional<Block> block = cache.Take(1000, 7, fences.callback());
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->ptr, 0x1000u);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_FALSE(cache.Take(1000, 7, fences.callback()).has_value());
}

TEST(BlockCacheTest, WaitsForFencesOfOtherStreamsWithoutBlocking) {
  BlockCache cache;
  FakeFences fences;
  cache.Give({0x2000, 512, 1}, {101, 102});
  fences.completed = {101};
  EXPECT_FALSE(cache.Take(100, 1, fences.callback()).has_value());
  fences.completed = {101, 102};
  fences.asked.clear();
  EXPECT_TRUE(cache.Take(100, 1, fences.callback()).has_value());
  // 101 reported completion the first time, so only 102 was asked again.
  EXPECT_EQ(fences.asked, std::vector<uintptr_t>{102});
}

TEST(BlockCacheTest, TakesTheSmallestFitButNeverMoreThanTwiceTheRequest) {
  BlockCache cache;
  FakeFences fences;
  cache.Give({0xA, 4096, 0}, {});
  cache.Give({0xB, 1024, 0}, {});
  cache.Give({0xC, 2048, 0}, {});
  EXPECT_EQ(cache.Take(1000, 0, fences.callback())->ptr, 0xBu);
  EXPECT_EQ(cache.Take(1000, 0, fences.callback())->ptr, 0xCu);
  // 4096 would waste more than the 1024 asked for.
  EXPECT_FALSE(cache.Take(1000, 0, fences.callback()).has_value());
  EXPECT_EQ(cache.Take(3000, 0, fences.callback())->ptr, 0xAu);
}

TEST(BlockCacheTest, SkipsABusyBlockForAnIdleOneOfTheSameSize) {
  BlockCache cache;
  FakeFences fences;
  cache.Give({0x1, 512, 0}, {55});
  cache.Give({0x2, 512, 0}, {});
  EXPECT_EQ(cache.Take(512, 0, fences.callback())->ptr, 0x2u);
  EXPECT_FALSE(cache.Take(512, 0, fences.callback()).has_value());
}

TEST(BlockCacheTest, TakeIdleReleasesOnlyCompletedBlocks) {
  BlockCache cache;
  FakeFences fences;
  cache.Give({0x1, 512, 0}, {9});
  cache.Give({0x2, 2u << 20, 3}, {});
  std::vector<Block> idle = cache.TakeIdle(fences.callback());
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].ptr, 0x2u);
  EXPECT_EQ(cache.cached_bytes(), 512u);
  EXPECT_EQ(cache.num_cached(), 1u);
  fences.completed = {9};
  EXPECT_EQ(cache.TakeIdle(fences.callback()).size(), 1u);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

}  // namespace
}  // namespace commir::cuda
