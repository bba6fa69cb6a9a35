// Passes and printing that grow with the program, not faster: 20k all_gather + matmul
// pairs through each collective-matmul schedule, a 100k-op global program through
// propagate-sharding and lower-to-spmd, and 8k (24k) attentions of all-gathered k and v
// through ring-attention (ulysses-attention), each printed. Before the fixes the printer
// renamed the i-th clashing name by trying suffixes 1..i (the schedules name every
// loop's values alike; lower-to-spmd names every gather %a_ag) and the passes erased
// replaced ops one by one, searching the user list of the shared weights each time:
// the bidirectional ring took minutes at this size. Now each case takes seconds, well
// within the test's timeout (a generous bound, not a timed assertion).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmarks/program_generator.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

constexpr int64_t kPairs = 20000;
// Matmuls of the global program (each followed by an add: 100k ops).
constexpr int64_t kGlobalPairs = 50000;
// Attentions of all-gathered k and v, each reading the previous one's output.
constexpr int64_t kAttentions = 8000;

std::unique_ptr<Module> Pairs() {
  return testing::ParseForTest(bench::GenerateGatherMatmulPairs(3 * kPairs).text);
}

// Every pair rewritten, the result verifies and prints with one line per op.
void ExpectScheduled(Module& module, absl::StatusOr<int> rewritten) {
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(*rewritten, kPairs);
  ASSERT_TRUE(VerifyModule(module).ok());
  std::string text = PrintModule(module);
  EXPECT_GT(text.size(), static_cast<size_t>(kPairs) * 100);
}

TEST(ScheduleScalingTest, BidirectionalRing) {
  std::unique_ptr<Module> module = Pairs();
  ASSERT_NE(module, nullptr);
  ExpectScheduled(*module, RingCollectiveMatmul(*module, RingDirection::kBi));
}

TEST(ScheduleScalingTest, UnidirectionalRing) {
  std::unique_ptr<Module> module = Pairs();
  ASSERT_NE(module, nullptr);
  ExpectScheduled(*module, RingCollectiveMatmul(*module, RingDirection::kUni));
}

TEST(ScheduleScalingTest, Pipeline) {
  std::unique_ptr<Module> module = Pairs();
  ASSERT_NE(module, nullptr);
  ExpectScheduled(*module, PipelineCollectiveMatmul(*module, 4, 2, nullptr));
}

TEST(ScheduleScalingTest, LowerToSpmd) {
  std::unique_ptr<Module> module =
      testing::ParseForTest(bench::GenerateShardedMatmulChain(2 * kGlobalPairs).text);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(sharding::PropagateSharding(*module).ok());
  ASSERT_TRUE(sharding::LowerToSpmd(*module).ok());
  ASSERT_TRUE(VerifyModule(*module).ok());
  // One all_gather of %a, which every matmul reuses (lower-to-spmd makes each reshard
  // once), however many matmuls read it.
  std::string text = PrintModule(*module);
  EXPECT_NE(text.find("%a_ag = all_gather"), std::string::npos);
  EXPECT_EQ(text.find("%a_ag_1 = all_gather"), std::string::npos);
  EXPECT_NE(text.find(absl::StrCat("%c", kGlobalPairs - 1, " = matmul(%a_ag, %b)")), std::string::npos);
}

// Each rewritten attention erased its gathers after walking everything it depended on
// (the whole chain before it) to a fixed point: cubic for the ring, minutes at 8k.
void ExpectAttentionsRewritten(int64_t attentions, absl::Status (*schedule)(Module&)) {
  std::unique_ptr<Module> module =
      testing::ParseForTest(bench::GenerateGatheredAttentionChain(3 * attentions).text);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(schedule(*module).ok());
  ASSERT_TRUE(VerifyModule(*module).ok());
  std::string text = PrintModule(*module);
  // No all_gather of the sequence is left; every attention was rewritten.
  EXPECT_EQ(text.find("all_gather(%k)"), std::string::npos);
  EXPECT_EQ(text.find("all_gather(%v)"), std::string::npos);
}

TEST(ScheduleScalingTest, RingAttention) {
  ExpectAttentionsRewritten(kAttentions,
                            [](Module& m) { return RingAttention(m, /*zigzag=*/false); });
}

TEST(ScheduleScalingTest, UlyssesAttention) {
  // Ulysses emits less per attention: the old code was quadratic here (84 s at 24k).
  ExpectAttentionsRewritten(3 * kAttentions, [](Module& m) { return UlyssesAttention(m); });
}

}  // namespace
}  // namespace commir::schedules
