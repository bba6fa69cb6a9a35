// propagate-sharding on whole training steps whose arguments carry Megatron-LM's layouts
// (the batch over dp, q/k/v and the MLP's first weight split by output features over
// tp, the output projections by input features) and nothing else annotated: what the
// time objective keeps and what it gives up, against the one-device step.
//
// At a width where compute dominates, the step runs as Megatron-LM runs it: no weight
// and no activation gathered, every gradient all_reduced over dp. At a toy width the
// same step on a dp x tp mesh is faster with every dp rank computing the whole batch (a
// few gathers against almost no work) and the objective says so; either way the
// partitioned step computes what one device does.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

// A pre-norm (RMSNorm) transformer block with a mean-squared-error loss: hidden `h`, 4 heads, the
// MLP 4h wide, a batch of 8 sequences of `s` tokens, f32.
std::string Block(int64_t h, int64_t s) {
  return absl::Substitute(R"(mesh @m(dp=2, tp=4)

func @block(%g1: f32[$0], %wq: f32[$0, $0@tp], %wk: f32[$0, $0@tp], %wv: f32[$0, $0@tp],
            %wo: f32[$0@tp, $0], %g2: f32[$0], %w1: f32[$0, $2@tp], %w2: f32[$2@tp, $0],
            %x: f32[8@dp, $1, $0], %target: f32[8@dp, $1, $0]) -> f32[] {
  %h = rmsnorm(%x, %g1)
  %q = matmul(%h, %wq)
  %k = matmul(%h, %wk)
  %v = matmul(%h, %wv)
  %q4 = reshape(%q) : f32[8, $1, 4, $3]
  %k4 = reshape(%k) : f32[8, $1, 4, $3]
  %v4 = reshape(%v) : f32[8, $1, 4, $3]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}
  %oh = attention(%qh, %kh, %vh) {causal}
  %ot = transpose(%oh) {perm = [0, 2, 1, 3]}
  %o = reshape(%ot) : f32[8, $1, $0]
  %attn = matmul(%o, %wo)
  %r1 = add(%x, %attn)
  %h2 = rmsnorm(%r1, %g2)
  %u = matmul(%h2, %w1)
  %a = gelu(%u)
  %d = matmul(%a, %w2)
  %y = add(%r1, %d)
  %err = sub(%y, %target)
  %sq = mul(%err, %err)
  %loss = reduce_mean(%sq) {dims = [0, 1, 2]}
  return %loss
}
)",
                          h, s, 4 * h, h / 4);
}

constexpr char kTrainingStep[] =
    "training-step{func=@block,params=\"g1,wq,wk,wv,wo,g2,w1,w2\",lr=0.1,clip_grad_norm=1}";

struct Collectives {
  int gathers_of_arguments = 0;
  int gathers_over_dp = 0;
  int all_reduces_over_dp = 0;
};

Collectives Count(const Function& f) {
  Collectives c;
  WalkOps(f.body(), [&](Operation* op) {
    const Attribute* axis = op->attrs().Find("axis");
    const bool over_dp = axis != nullptr && axis->axes() == AxisList{"dp"};
    if (op->Is(OpKind::kAllGather)) {
      c.gathers_of_arguments += op->operand(0)->kind() == Value::Kind::kBlockArgument ? 1 : 0;
      c.gathers_over_dp += over_dp ? 1 : 0;
    } else if (op->Is(OpKind::kAllReduce)) {
      c.all_reduces_over_dp += over_dp ? 1 : 0;
    }
  });
  return c;
}

std::unique_ptr<Module> Step(int64_t h, int64_t s) {
  std::unique_ptr<Module> module = testing::ParseForTest(Block(h, s));
  if (module == nullptr) return nullptr;
  EXPECT_TRUE(testing::ApplyPassPipeline(kTrainingStep, *module).ok());
  return module;
}

// Hidden 1024, 512 tokens per sequence: splitting the batch over dp halves 0.2 TFLOP of
// f32 work per step (3 ms at H100's 67 TFLOP/s), far more than the gradients' all_reduces
// take. The step keeps Megatron-LM's layouts: no weight gathered, no activation gathered
// over dp; each of the six matrix weights' gradients and the loss all_reduced over dp
// (the norms' gains, whole on every device, sum their gradients over dp and tp).
TEST(TrainingStepPartition, WideBlockKeepsTheBatchSplitAndTheWeightsWhereTheyAre) {
  std::unique_ptr<Module> module = Step(1024, 512);
  ASSERT_NE(module, nullptr);
  Function& step = *module->FindFunction("block_step");
  ASSERT_TRUE(PropagateSharding(step).ok());
  ASSERT_TRUE(LowerToSpmd(step).ok());
  Collectives c = Count(step);
  EXPECT_EQ(c.gathers_of_arguments, 0) << PrintFunction(step);
  EXPECT_EQ(c.gathers_over_dp, 0) << PrintFunction(step);
  EXPECT_EQ(c.all_reduces_over_dp, 7) << PrintFunction(step);
}

// Hidden 32, 16 tokens: the whole step is a few MFLOP, and each collective's latency
// outweighs it. Whatever plan the objective picks, the partitioned step computes what
// the one-device step does.
TEST(TrainingStepPartition, ToyBlockComputesWhatOneDeviceDoes) {
  std::unique_ptr<Module> module = Step(32, 16);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckPartitioned(PrintModule(*module), "block_step", /*seed=*/5);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
}

}  // namespace
}  // namespace commir::sharding
