// The saved set of a layer measured after partitioning at tp = 2, against the set derived
// by hand from the derivative rules, by role (which op of @layer made the value), not by
// name: Megatron-LM's column- then row-parallel MLP and attention block.
#include "search/plan/saved_activations.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "parser/parser.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

// The layer's program: what layer_cost partitions (autodiff{seed=cotangents}, then the
// partition pipeline).
std::unique_ptr<Module> Partitioned(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "test.commir");
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<AutodiffPass>(
                   {.func = "layer", .seed = AutodiffPassOptions::Seed::kCotangents})}}
          .Then(sharding::PartitionPipeline());
  absl::Status s = RunPipeline(**module, pipeline);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? *std::move(module) : nullptr;
}

// The result of @layer's first top-level op of `kind` reading `operand` (null: any).
const Value* Made(const Function& f, OpKind kind, const Value* operand = nullptr, int result = 0) {
  for (const Operation* op : *f.body()) {
    if (!op->Is(kind)) continue;
    if (operand != nullptr && (op->num_operands() == 0 || op->operand(0) != operand)) continue;
    return op->result(result);
  }
  return nullptr;
}

std::vector<const Value*> KeptForward(const SavedActivations& saved) {
  std::vector<const Value*> kept;
  for (const SavedActivations::Kept& k : saved.kept) kept.push_back(k.forward);
  return kept;
}

// y = gelu(x w1) w2, w1 split by columns and w2 by rows over tp (no sequence parallelism):
// the backward reads x (for dW1), u = x w1 (gelu's derivative), a = gelu(u) (gelu's
// derivative, and dW2). y is the layer's output, not kept for its own backward.
TEST(SavedActivationsTest, TensorParallelMlpKeepsItsInputPreActivationAndActivation) {
  std::unique_ptr<Module> module = Partitioned(R"(mesh @m(tp=2)

func @layer(%x: bf16[1, 64, 32], %w1: bf16[32, 128@tp], %w2: bf16[128@tp, 32]) -> bf16[1, 64, 32] on @m {
  %u = matmul(%x, %w1) : bf16[1, 64, 128@tp]
  %a = gelu(%u)
  %y = matmul(%a, %w2) : bf16[1, 64, 32]
  return %y
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("layer");
  const Function& g = *module->FindFunction("layer_grad");
  const SavedActivations saved = MeasureSaved(f, g);
  const Value* x = f.body()->argument(0);
  const Value* u = Made(f, OpKind::kMatmul, x);
  const Value* a = Made(f, OpKind::kGelu, u);
  ASSERT_NE(u, nullptr);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(KeptForward(saved), (std::vector<const Value*>{x, u, a}));
  // Per device, bf16: x whole (64 x 32), u and a half of 64 x 128.
  EXPECT_EQ(saved.all_bytes, 64 * 32 * 2 + 2 * (64 * 64 * 2));
  EXPECT_EQ(saved.attention_bytes, 0);
}

// A row-parallel projection whose weight the program gathers (a `reshard` to whole, as a
// ZeRO-3 layer gathers its weights): the backward then reads the gathered weight. That
// is made from the weight alone, a parameter the model's state holds (Megatron-LM saves
// the weight itself for the backward), so the kept set is the MLP's above: x, u and a.
TEST(SavedActivationsTest, GatheredWeightIsNotAnActivation) {
  std::unique_ptr<Module> module = Partitioned(R"(mesh @m(tp=2)

func @layer(%x: bf16[1, 1024, 64], %w1: bf16[64, 128@tp], %w2: bf16[128@tp, 1024]) -> bf16[1, 1024, 1024] on @m {
  %u = matmul(%x, %w1) : bf16[1, 1024, 128@tp]
  %a = gelu(%u)
  %w2w = reshard(%w2) : bf16[128, 1024]
  %y = matmul(%a, %w2w) : bf16[1, 1024, 1024]
  return %y
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("layer");
  const Function& g = *module->FindFunction("layer_grad");
  // The premise: the gradient's backward reads an all_gather of the weight w2.
  const Value* w2 = g.body()->argument(2);
  const Value* w2_gathered = nullptr;
  for (const Operation* op : *g.body()) {
    if (op->Is(OpKind::kAllGather) && op->operand(0) == w2) w2_gathered = op->result(0);
  }
  ASSERT_NE(w2_gathered, nullptr);
  ASSERT_GE(w2_gathered->users().size(), 2u);  // the forward's GEMM and the backward's
  const SavedActivations saved = MeasureSaved(f, g);
  const Value* x = f.body()->argument(0);
  const Value* u = Made(f, OpKind::kMatmul, x);
  const Value* a = Made(f, OpKind::kGelu, u);
  ASSERT_NE(u, nullptr);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(KeptForward(saved), (std::vector<const Value*>{x, u, a}));
  // Per device, bf16: x whole (1024 x 64), u and a half of 1024 x 128.
  EXPECT_EQ(saved.all_bytes, 1024 * 64 * 2 + 2 * (1024 * 64 * 2));
}

// Self-attention, heads split over tp: the backward reads x (for dWq, dWk, dWv), q, k
// and v in the attention's layout (attention_grad; their projections' outputs are the
// same tensors in another layout, kept once), the attention's output (attention_grad, and
// dWo through its reshaped view) and its log-sum-exp (attention_grad).
TEST(SavedActivationsTest, TensorParallelAttentionKeepsQkvOutputAndLogSumExp) {
  std::unique_ptr<Module> module = Partitioned(R"(mesh @m(tp=2)

func @layer(%x: bf16[1, 64, 32], %wq: bf16[32, 32@tp], %wk: bf16[32, 32@tp], %wv: bf16[32, 32@tp], %wo: bf16[32@tp, 32]) -> bf16[1, 64, 32] on @m {
  %q = matmul(%x, %wq) : bf16[1, 64, 32@tp]
  %k = matmul(%x, %wk) : bf16[1, 64, 32@tp]
  %v = matmul(%x, %wv) : bf16[1, 64, 32@tp]
  %q4 = reshape(%q) : bf16[1, 64, 4@tp, 8]
  %k4 = reshape(%k) : bf16[1, 64, 4@tp, 8]
  %v4 = reshape(%v) : bf16[1, 64, 4@tp, 8]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}
  %oh = attention(%qh, %kh, %vh) {causal}
  %ot = transpose(%oh) {perm = [0, 2, 1, 3]}
  %o = reshape(%ot) : bf16[1, 64, 32@tp]
  %y = matmul(%o, %wo) : bf16[1, 64, 32]
  return %y
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("layer");
  const Function& g = *module->FindFunction("layer_grad");
  const SavedActivations saved = MeasureSaved(f, g);
  const Value* x = f.body()->argument(0);
  const Operation* attention = Made(f, OpKind::kAttention)->defining_op();
  const Value* qh = attention->operand(0);
  const Value* kh = attention->operand(1);
  const Value* vh = attention->operand(2);
  // q, k and v each come from a projection of x by way of a reshape and a transpose.
  for (const Value* h : {qh, kh, vh}) {
    ASSERT_TRUE(h->defining_op()->Is(OpKind::kTranspose));
    const Value* r = h->defining_op()->operand(0);
    ASSERT_TRUE(r->defining_op()->Is(OpKind::kReshape));
    const Operation* projection = r->defining_op()->operand(0)->defining_op();
    ASSERT_TRUE(projection->Is(OpKind::kMatmul));
    EXPECT_EQ(projection->operand(0), x);
  }
  // The log-sum-exp only the gradient's copy of the attention returns: no forward value.
  EXPECT_EQ(KeptForward(saved),
            (std::vector<const Value*>{x, qh, kh, vh, attention->result(0), nullptr}));
  ASSERT_EQ(saved.kept.size(), 6u);
  const Operation* copy = saved.kept[5].recomputed->defining_op();
  ASSERT_TRUE(copy->Is(OpKind::kAttention));
  EXPECT_EQ(saved.kept[5].recomputed, copy->result(1));
  EXPECT_EQ(copy->parent_function(), &g);
  // Per device: x whole (64 x 32 bf16); q, k, v and the output 2 of 4 heads x 64 x 8
  // bf16; the log-sum-exp 2 heads x 64 f32.
  const int64_t head_block = 2 * 64 * 8 * 2;
  EXPECT_EQ(saved.all_bytes, 64 * 32 * 2 + 4 * head_block + 2 * 64 * 4);
  EXPECT_EQ(saved.attention_bytes, head_block + 2 * 64 * 4);
}

}  // namespace
}  // namespace commir::search::plan
