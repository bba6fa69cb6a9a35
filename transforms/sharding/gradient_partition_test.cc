// The partitioner on gradient functions (the training step's backward): the
// backward pass of a Megatron tensor- and sequence-parallel block must get Megatron's
// backward collectives, and data-parallel weight gradients must end in one reduction
// over the data axis per weight. Each case also runs on the cpu mesh against one device.
//
// Megatron-SP's collectives per layer (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", section 4.2.2; Megatron-LM's
// megatron/core/tensor_parallel/{layers,mappings}.py): forward, an all_gather of each
// normed activation before the column-parallel GEMMs and a reduce_scatter after each
// row-parallel one; backward, the transposes: an all_gather of the output gradient
// before each row-parallel GEMM's backward and a reduce_scatter of the partial input
// gradient after each column-parallel GEMM's backward; plus an all_reduce of the
// layernorm weights' gradients (their rows are split over the sequence). Each of the
// eight moves (n-1)/n of one [sequence, hidden] activation per device.
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

bool IsCollective(const Operation& op) {
  return op.Is(OpKind::kAllGather) || op.Is(OpKind::kReduceScatter) || op.Is(OpKind::kAllReduce) ||
         op.Is(OpKind::kAllToAll);
}

// "all_gather(tp)": a collective's kind and the mesh axes it runs over.
std::string KindAndAxes(const Operation& op) {
  const Attribute* axis = op.attrs().Find("axis");
  std::string axes = axis == nullptr ? "?" : absl::StrJoin(axis->axes(), ",");
  return absl::StrCat(op.name(), "(", axes, ")");
}

std::vector<const Operation*> Collectives(const Function& function) {
  std::vector<const Operation*> out;
  for (const Operation* op : *function.body()) {
    if (IsCollective(*op)) out.push_back(op);
  }
  return out;
}

int CountOf(const Function& function, const std::string& kind_and_axes) {
  int n = 0;
  for (const Operation* op : Collectives(function)) n += KindAndAxes(*op) == kind_and_axes;
  return n;
}

double BytesOf(const FunctionCommReport& report, OpKind kind) {
  for (const CollectiveTotals& c : report.collectives) {
    if (c.kind == kind) return c.bytes_per_device;
  }
  return 0;
}

bool IsReturned(const Value* value) {
  for (const Operation* user : value->users()) {
    if (user->def().Has(kTerminator)) return true;
  }
  return false;
}

// The op that defines `value`'s operand `i`, or null for a block argument.
const Operation* Producer(const Operation& op, int i) { return op.operand(i)->defining_op(); }

// Differentiates the first function of `text` (with `seed_cotangents`, or from its
// scalar loss), partitions the gradient function with the default pipeline and checks
// it on the cpu mesh against one device.
struct PartitionedGradient {
  std::unique_ptr<Module> module;
  const Function* grad = nullptr;
  std::string lowered;
};

PartitionedGradient PartitionGradient(const std::string& text, bool seed_cotangents) {
  PartitionedGradient out;
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return out;
  const Function& f = *module->functions().front();
  AutodiffOptions options;
  options.seed_cotangents = seed_cotangents;
  absl::StatusOr<Function*> grad = Differentiate(*module, f, options);
  EXPECT_TRUE(grad.ok()) << grad.status();
  if (!grad.ok()) return out;
  const std::string name = (*grad)->name();
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitionOnly(PrintModule(*module), name, /*seed=*/7);
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return out;
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
  out.module = std::move(check->module);
  out.grad = out.module->FindFunction(name);
  out.lowered = std::move(check->lowered);
  return out;
}

std::string ReadExample(const std::string& name) {
  std::ifstream in("testdata/examples/" + name + ".commir");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The shared block (tp=4, 256 tokens x 256 hidden, f32): its gradient function has
// Megatron-SP's forward and backward collectives and nothing else (no all_reduce of an
// activation gradient, no all_to_all, no weight gathered).
TEST(BlockGradient, SharedBlockGetsMegatronSequenceParallelCollectives) {
  std::string text = ReadExample("transformer_block");
  ASSERT_FALSE(text.empty()) << "cannot read testdata/examples/transformer_block.commir";
  PartitionedGradient p = PartitionGradient(text, /*seed_cotangents=*/true);
  ASSERT_NE(p.grad, nullptr);
  const Function& grad = *p.grad;
  EXPECT_EQ(Collectives(grad).size(), 12u) << p.lowered;
  EXPECT_EQ(CountOf(grad, "all_gather(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "reduce_scatter(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "all_reduce(tp)"), 4) << p.lowered;
  const double activation = 256.0 * 256 * 4 * 3 / 4;  // (n-1)/n of [256, 256] f32
  FunctionCommReport report = ComputeCommReport(grad);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllGather), 4 * activation);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kReduceScatter), 4 * activation);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllReduce), 4 * (256.0 * 4 * 2 * 3 / 4));

  int cotangent_gathers = 0, normed_gathers = 0;
  for (const Operation* op : Collectives(grad)) {
    SCOPED_TRACE(op->result(0)->name());
    if (op->Is(OpKind::kAllGather)) {
      // Sequence-split rows gathered: forward, the two normed activations; backward, the
      // output gradient and the residual stream's gradient before the row-parallel
      // GEMMs' backward. Never a weight.
      EXPECT_EQ(op->attrs().GetInt("dim", -1), 0);
      const Operation* producer = Producer(*op, 0);
      if (producer == nullptr) {
        EXPECT_EQ(op->operand(0)->name(), "d_result0");
        ++cotangent_gathers;
      } else if (producer->Is(OpKind::kLayerNorm)) {
        ++normed_gathers;
      } else {
        EXPECT_TRUE(producer->Is(OpKind::kAdd)) << producer->name();
        ++cotangent_gathers;
      }
    } else if (op->Is(OpKind::kReduceScatter)) {
      // Partial sums of row-parallel GEMMs (forward) and of the column-parallel GEMMs'
      // input gradients (backward; q, k and v's summed), scattered onto the sequence.
      EXPECT_EQ(op->attrs().GetInt("dim", -1), 0);
      const Operation* producer = Producer(*op, 0);
      ASSERT_NE(producer, nullptr);
      EXPECT_TRUE(producer->Is(OpKind::kMatmul) || producer->Is(OpKind::kAdd)) << producer->name();
    } else {
      // The layernorm weights' gradients: [256], returned.
      ASSERT_TRUE(op->Is(OpKind::kAllReduce)) << op->name();
      EXPECT_EQ(op->result(0)->type().dims(), std::vector<int64_t>{256});
      EXPECT_TRUE(IsReturned(op->result(0)));
    }
  }
  EXPECT_EQ(normed_gathers, 2) << p.lowered;
  EXPECT_EQ(cotangent_gathers, 2) << p.lowered;
}

// A pre-norm block with a batch: tokens split over dp (batch) and tp (sequence), the
// weights laid out for Megatron over tp and, with `zero`, their other dimension split
// over dp too (ZeRO-3 / FSDP: each data-parallel rank keeps a shard). The loss is the
// mean square of the output, so autodiff returns the loss and every gradient.
std::string DataParallelBlock(bool zero) {
  const char* d = zero ? "@dp" : "";
  return absl::Substitute(R"(mesh @m(dp=2, tp=4)

func @block(%x: f32[2@dp, 64@tp, 32],
            %g1: f32[32], %b1: f32[32],
            %wq: f32[32$0, 32@tp], %wk: f32[32$0, 32@tp], %wv: f32[32$0, 32@tp],
            %wo: f32[32@tp, 32$0],
            %g2: f32[32], %b2: f32[32],
            %w1: f32[32$0, 64@tp], %w2: f32[64@tp, 32$0]) -> f32[] {
  %h = layernorm(%x, %g1, %b1) {eps = 1e-5}
  %q = matmul(%h, %wq) : f32[2@dp, 64, 32@tp]
  %k = matmul(%h, %wk) : f32[2@dp, 64, 32@tp]
  %v = matmul(%h, %wv) : f32[2@dp, 64, 32@tp]
  %q4 = reshape(%q) : f32[2@dp, 64, 4@tp, 8]
  %k4 = reshape(%k) : f32[2@dp, 64, 4@tp, 8]
  %v4 = reshape(%v) : f32[2@dp, 64, 4@tp, 8]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]} : f32[2@dp, 4@tp, 64, 8]
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]} : f32[2@dp, 4@tp, 64, 8]
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]} : f32[2@dp, 4@tp, 64, 8]
  %oh = attention(%qh, %kh, %vh) {causal}
  %ot = transpose(%oh) {perm = [0, 2, 1, 3]} : f32[2@dp, 64, 4@tp, 8]
  %o = reshape(%ot) : f32[2@dp, 64, 32@tp]
  %attn = matmul(%o, %wo) : f32[2@dp, 64@tp, 32]
  %r1 = add(%x, %attn)
  %h2 = layernorm(%r1, %g2, %b2) {eps = 1e-5}
  %u = matmul(%h2, %w1) : f32[2@dp, 64, 64@tp]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[2@dp, 64@tp, 32]
  %y = add(%r1, %d)
  %sq = mul(%y, %y)
  %loss = reduce_mean(%sq) {dims = [0, 1, 2]}
  return %loss
}
)",
                          d);
}

const char* const kMatrixWeights[] = {"wq", "wk", "wv", "wo", "w1", "w2"};

// The index of argument `name` of `function` (its gradient is result 1 + index).
int ArgumentIndex(const Function& function, const std::string& name) {
  const Block& body = *function.body();
  for (int i = 0; i < body.num_arguments(); ++i) {
    if (body.argument(i)->name() == name) return i;
  }
  return -1;
}

// The op that defines returned value `r` of `function`.
const Operation* ReturnedBy(const Function& function, int r) {
  for (const Operation* op : *function.body()) {
    if (op->def().Has(kTerminator)) return op->operand(r)->defining_op();
  }
  return nullptr;
}

// 2 x 4 (dp x tp), weights replicated over dp: Megatron-SP over tp as above, and each
// matrix weight's gradient all_reduced once over dp (data-parallel gradient averaging,
// as DDP does); the layernorm weights' gradients are summed over both axes at once.
TEST(BlockGradient, DataParallelWeightGradientsEndInOneAllReduceOverDp) {
  PartitionedGradient p = PartitionGradient(DataParallelBlock(/*zero=*/false), false);
  ASSERT_NE(p.grad, nullptr);
  const Function& grad = *p.grad;
  EXPECT_EQ(CountOf(grad, "all_gather(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "reduce_scatter(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "all_reduce(dp)"), 6) << p.lowered;
  // The loss and the four layernorm weights' gradients.
  EXPECT_EQ(CountOf(grad, "all_reduce(dp,tp)"), 5) << p.lowered;
  EXPECT_EQ(Collectives(grad).size(), 19u) << p.lowered;
  // Bytes per device (ring formulas, comm_report.h). tp: each all_gather and
  // reduce_scatter moves 3/4 of one [64, 32] f32 activation of the device's batch
  // element, 6144 bytes. dp: all_reduce sends 2 (n-1)/n = 1 x each device's tp shards of
  // the weight gradients, 2048 floats (3 x 32x32/4 + 32x32/4 + 2 x 32x64/4). (dp, tp):
  // 2 x 7/8 of the four layernorm weights' gradients (32 floats each) and of the loss.
  FunctionCommReport report = ComputeCommReport(grad);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllGather), 4 * 6144.0);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kReduceScatter), 4 * 6144.0);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllReduce),
                   2048 * 4.0 + 2 * 7 / 8.0 * (4 * 32 * 4 + 4));
  for (const char* weight : kMatrixWeights) {
    SCOPED_TRACE(weight);
    int arg = ArgumentIndex(grad, weight);
    ASSERT_GE(arg, 0);
    const Operation* op = ReturnedBy(grad, 1 + arg);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(KindAndAxes(*op), "all_reduce(dp)");
    // Each device reduces its tp shard of the weight's gradient, a quarter of it.
    EXPECT_EQ(op->result(0)->type().num_elements() * 4, grad.arg_types()[arg].num_elements());
  }
}

// The same step with each matrix weight's other dimension sharded over dp too (ZeRO-3,
// FSDP): the forward all_gathers each weight over dp once (the backward reuses it) and
// each weight gradient ends in one reduce_scatter over dp onto the weight's dp shard.
TEST(BlockGradient, ZeroShardedWeightGradientsEndInOneReduceScatterOverDp) {
  PartitionedGradient p = PartitionGradient(DataParallelBlock(/*zero=*/true), false);
  ASSERT_NE(p.grad, nullptr);
  const Function& grad = *p.grad;
  EXPECT_EQ(CountOf(grad, "all_gather(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "reduce_scatter(tp)"), 4) << p.lowered;
  EXPECT_EQ(CountOf(grad, "all_gather(dp)"), 6) << p.lowered;
  EXPECT_EQ(CountOf(grad, "reduce_scatter(dp)"), 6) << p.lowered;
  EXPECT_EQ(CountOf(grad, "all_reduce(dp,tp)"), 5) << p.lowered;
  EXPECT_EQ(Collectives(grad).size(), 25u) << p.lowered;
  // Bytes per device: the tp collectives as above; over dp (n = 2) each weight's
  // all_gather and its gradient's reduce_scatter move half of its tp shard, 2048 floats
  // in all; the (dp, tp) all_reduces as above.
  FunctionCommReport report = ComputeCommReport(grad);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllGather), 4 * 6144.0 + 2048 * 4 / 2.0);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kReduceScatter), 4 * 6144.0 + 2048 * 4 / 2.0);
  EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllReduce), 2 * 7 / 8.0 * (4 * 32 * 4 + 4));
  for (const char* weight : kMatrixWeights) {
    SCOPED_TRACE(weight);
    int arg = ArgumentIndex(grad, weight);
    ASSERT_GE(arg, 0);
    const Operation* op = ReturnedBy(grad, 1 + arg);
    while (op != nullptr && op->Is(OpKind::kReshape)) op = op->operand(0)->defining_op();
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(KindAndAxes(*op), "reduce_scatter(dp)");
    // An eighth of the weight: its tp shard, scattered over dp.
    EXPECT_EQ(op->result(0)->type().num_elements() * 8, grad.arg_types()[arg].num_elements());
  }
}

}  // namespace
}  // namespace commir::sharding
