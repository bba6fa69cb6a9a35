#include "search/plan/memory_headroom.h"

#include "gtest/gtest.h"
#include "search/plan/memory_model.h"

namespace commir::search::plan {
namespace {

// NCCL's default buffers per channel and peer, summed by hand from src/init.cc's
// definitions: 4 MiB (Simple) + 4,915,200 (LL128) + 524,288 (LL) bytes.
constexpr double kPerChannelAndPeer = 4194304.0 + 4915200.0 + 524288.0;

TEST(MemoryHeadroomTest, NcclBuffersFollowTheCommunicatorsARankJoins) {
  ParallelPlan p;  // one GPU: no communicator
  EXPECT_EQ(NcclBufferBytes(p), 0);
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  // tp ring, dp ring, pipeline previous + next: 4 peers of 16 channels.
  EXPECT_DOUBLE_EQ(NcclBufferBytes(p), 4 * 16 * kPerChannelAndPeer);
  p.cp = 2;
  p.dp = 1;  // the gradients still reduce over dp x cp = 2
  EXPECT_DOUBLE_EQ(NcclBufferBytes(p), 5 * 16 * kPerChannelAndPeer);
}

TEST(MemoryHeadroomTest, DefaultAddsContextNcclAndFragmentationUserReplacesAll) {
  ParallelPlan p;
  p.dp = 8;
  const MemoryHeadroom d = HeadroomFor(p, -1);
  EXPECT_DOUBLE_EQ(d.fixed_bytes, 723.0 * 1024 * 1024 + 16 * kPerChannelAndPeer);
  EXPECT_DOUBLE_EQ(d.fragmentation, 0.15);
  const MemoryHeadroom u = HeadroomFor(p, 2e9);
  EXPECT_DOUBLE_EQ(u.fixed_bytes, 2e9);
  EXPECT_EQ(u.fragmentation, 0);
}

// Megatron-LM's distributed optimizer with bf16 parameters and fp32 gradients keeps
// 6 + 12/d bytes per parameter (its docs' distrib_optimizer.md table), and a rank fits
// when what it allocates, grossed up by the fragmentation, plus the fixed headroom is
// within the capacity.
TEST(MemoryHeadroomTest, DistributedOptimizerBytesAndTheFitWithHeadroom) {
  StageFootprint f;
  f.parameters_per_device = 1'000'000'000;
  MemoryConfig c;
  c.dp = 8;
  c.zero_stage = 1;
  absl::StatusOr<StageMemory> m = StageMemoryUse(f, c);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->total, 1e9 * (6 + 12.0 / 8));  // 7.5 GB
  c.headroom_bytes = 1e9;
  c.fragmentation = 0.25;
  // Reserved 7.5 / 0.75 = 10 GB, plus 1 GB: 11 GB.
  c.hbm_capacity_bytes = 10.99e9;
  m = StageMemoryUse(f, c);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->headroom, 3.5e9, 1);
  EXPECT_FALSE(m->fits);
  c.hbm_capacity_bytes = 11.01e9;
  EXPECT_TRUE(StageMemoryUse(f, c)->fits);
  c.fragmentation = 1;
  EXPECT_FALSE(StageMemoryUse(f, c).ok());
  c.fragmentation = 0;
  c.headroom_bytes = -1;
  EXPECT_FALSE(StageMemoryUse(f, c).ok());
}

}  // namespace
}  // namespace commir::search::plan
