// combine-all-reduces on partitioned training steps, run on the cpu backend: the
// combined step computes bit for bit what the uncombined one does (summing a
// concatenated buffer sums each of its elements over the same devices in the same
// order), and both what the one-device step computes, within the tolerance every
// partitioning test uses.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"
#include "testing/spmd_check.h"
#include "transforms/collectives/combine_all_reduces.h"
#include "transforms/test_util.h"

namespace commir::collectives {
namespace {

// The demo's pre-norm transformer block (testdata/training/block_train.commir) with its
// batch split over dp and, where TP is `@tp`, its weights split the Megatron way.
std::string Block(const std::string& mesh, const std::string& tp, const std::string& sp) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)

func @block(%win: f32[16, 32], %g1: f32[32], %wq: f32[32, 32TP], %wk: f32[32, 32TP], %wv: f32[32, 32TP],
            %wo: f32[32TP, 32], %g2: f32[32], %w1: f32[32, 64TP], %w2: f32[64TP, 32],
            %x: f32[8@dp, 16SP, 16], %target: f32[8@dp, 16SP, 32]) -> f32[] {
  %e = matmul(%x, %win) : f32[8@dp, 16SP, 32]
  %h = rmsnorm(%e, %g1)
  %q = matmul(%h, %wq) : f32[8@dp, 16, 32TP]
  %k = matmul(%h, %wk) : f32[8@dp, 16, 32TP]
  %v = matmul(%h, %wv) : f32[8@dp, 16, 32TP]
  %q4 = reshape(%q) : f32[8@dp, 16, 4TP, 8]
  %k4 = reshape(%k) : f32[8@dp, 16, 4TP, 8]
  %v4 = reshape(%v) : f32[8@dp, 16, 4TP, 8]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}
  %oh = attention(%qh, %kh, %vh) {causal}
  %ot = transpose(%oh) {perm = [0, 2, 1, 3]}
  %o = reshape(%ot) : f32[8@dp, 16, 32TP]
  %attn = matmul(%o, %wo) : f32[8@dp, 16SP, 32]
  %r1 = add(%e, %attn)
  %h2 = rmsnorm(%r1, %g2)
  %u = matmul(%h2, %w1) : f32[8@dp, 16, 64TP]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[8@dp, 16SP, 32]
  %y = add(%r1, %d)
  %err = sub(%y, %target)
  %sq = mul(%err, %err)
  %loss = reduce_mean(%sq) {dims = [0, 1, 2]}
  return %loss
}
)",
                             {{"MESH", mesh}, {"TP", tp}, {"SP", sp}});
}

constexpr char kTrainingStep[] =
    "training-step{func=@block,params=\"win,g1,wq,wk,wv,wo,g2,w1,w2\",lr=0.3,"
    "clip_grad_norm=1}";

int CountAllReduces(const Function& f) {
  int n = 0;
  WalkOps(f.body(), [&](Operation* op) { n += op->Is(OpKind::kAllReduce) ? 1 : 0; });
  return n;
}

struct Case {
  std::string mesh;
  std::string tp;  // "@tp" or ""
  std::string sp;
  // All_reduces of the partitioned step: one per gradient (9), the clipping norm's
  // sum of squares and the loss; and after combining (see the tests).
  int before;
  int after;
};

void CheckCombinedStep(const Case& c) {
  SCOPED_TRACE(c.mesh);
  std::unique_ptr<Module> global = testing::ParseForTest(Block(c.mesh, c.tp, c.sp));
  ASSERT_NE(global, nullptr);
  ASSERT_TRUE(testing::ApplyPassPipeline(kTrainingStep, *global).ok());
  const Function& one_device = *global->FindFunction("block_step");

  std::unique_ptr<Module> lowered = global->Clone();
  ASSERT_TRUE(testing::RunPartitionPipeline(*lowered).ok());
  std::unique_ptr<Module> combined = lowered->Clone();
  absl::StatusOr<CombineCounts> counts =
      CombineAllReduces(*combined->FindFunction("block_step"), kDefaultThresholdBytes);
  ASSERT_TRUE(counts.ok()) << counts.status();
  absl::Status verified = VerifyModule(*combined);
  ASSERT_TRUE(verified.ok()) << verified.message() << "\n" << PrintModule(*combined);
  // The default spmd pipeline ends with the pass: it makes this combined step.
  std::unique_ptr<Module> by_default = global->Clone();
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*by_default).ok());
  EXPECT_EQ(PrintFunction(*by_default->FindFunction("block_step")),
            PrintFunction(*combined->FindFunction("block_step")));

  const Function& uncombined_step = *lowered->FindFunction("block_step");
  const Function& combined_step = *combined->FindFunction("block_step");
  EXPECT_EQ(CountAllReduces(uncombined_step), c.before) << PrintFunction(uncombined_step);
  EXPECT_EQ(CountAllReduces(combined_step), c.after) << PrintFunction(combined_step);
  EXPECT_EQ(counts->combined - counts->buckets, c.before - c.after);

  const std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(one_device, 11);
  absl::StatusOr<std::vector<runtime::Tensor>> expected =
      testing::RunWithGlobalInputs(one_device, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> apart =
      testing::RunWithGlobalInputs(uncombined_step, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> together =
      testing::RunWithGlobalInputs(combined_step, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(apart.ok()) << apart.status();
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(apart->size(), together->size());
  for (size_t i = 0; i < apart->size(); ++i) {
    EXPECT_TRUE((*together)[i].BitwiseEqual((*apart)[i])) << "result " << i;
  }
  std::string report;
  EXPECT_TRUE(testing::CompareResults(*together, *expected, &report)) << report;
}

// Data parallel on 2, 4 and 8 devices: the nine gradients are read only by the clipping
// norm and the updates, so they share one bucket (8768 floats, far below 25 MiB); the
// norm's sum of squares depends on all of them and goes with the loss, whose operand
// was ready long before: 11 all_reduces become 2.
TEST(CombineAllReducesNumericsTest, DataParallelStepIsBitwiseTheUncombinedOne) {
  for (const std::string dp : {"2", "4", "8"}) {
    CheckCombinedStep({"dp=" + dp, "", "", 11, 2});
  }
}

// dp x tp with Megatron's layouts and sequence parallelism: the gradients of the
// replicated weights (win, the norms' gains) are summed over (dp, tp), those of the
// split weights over dp only: two buckets, and the norm with the loss a third.
TEST(CombineAllReducesNumericsTest, MegatronStepIsBitwiseTheUncombinedOne) {
  CheckCombinedStep({"dp=2, tp=2", "@tp", "@tp", 11, 3});
  CheckCombinedStep({"dp=2, tp=4", "@tp", "@tp", 11, 3});
}

}  // namespace
}  // namespace commir::collectives
