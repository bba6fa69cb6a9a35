// MatchForwardCopy against autodiff's own record of what it copied: every value the
// backward reads (DifferentiateWithSaved, by identity) is matched to the forward value it
// was copied from, the forward copy is matched op for op, and names play no part.
#include "transforms/autodiff/forward_copy.h"

#include <memory>

#include "gtest/gtest.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

// y = gelu(x w1) w2.
constexpr char kMlp[] = R"(func @f(%x: f32[4, 8], %w1: f32[8, 16], %w2: f32[16, 8]) -> f32[4, 8] {
  %u = matmul(%x, %w1) : f32[4, 16]
  %a = gelu(%u)
  %y = matmul(%a, %w2) : f32[4, 8]
  return %y
})";

// Self-attention over [batch, heads, seq, head dim] with an output projection; autodiff's
// copy of the attention also returns its log-sum-exp.
constexpr char kAttention[] = R"(func @f(%x: f32[1, 8, 16], %wq: f32[16, 16], %wk: f32[16, 16], %wv: f32[16, 16], %wo: f32[16, 16]) -> f32[1, 8, 16] {
  %q = matmul(%x, %wq) : f32[1, 8, 16]
  %k = matmul(%x, %wk) : f32[1, 8, 16]
  %v = matmul(%x, %wv) : f32[1, 8, 16]
  %qh = reshape(%q) : f32[1, 8, 2, 8]
  %kh = reshape(%k) : f32[1, 8, 2, 8]
  %vh = reshape(%v) : f32[1, 8, 2, 8]
  %qt = transpose(%qh) {perm = [0, 2, 1, 3]}
  %kt = transpose(%kh) {perm = [0, 2, 1, 3]}
  %vt = transpose(%vh) {perm = [0, 2, 1, 3]}
  %o = attention(%qt, %kt, %vt) {causal}
  %ot = transpose(%o) {perm = [0, 2, 1, 3]}
  %or = reshape(%ot) : f32[1, 8, 16]
  %y = matmul(%or, %wo) : f32[1, 8, 16]
  return %y
})";

int TopLevelOps(const Function& f) {
  int n = 0;
  for (const Operation* op : *f.body()) n += op->def().Has(kTerminator) ? 0 : 1;
  return n;
}

void ExpectMatchesAutodiff(const char* program, bool rename) {
  std::unique_ptr<Module> module = testing::ParseForTest(program);
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  AutodiffOptions options;
  options.seed_cotangents = true;
  absl::StatusOr<Gradient> grad = DifferentiateWithSaved(*module, f, options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  if (rename) {
    // Every value of both functions called alike: a name match would find anything.
    for (Function* fn : module->functions()) {
      for (Value* arg : fn->body()->arguments()) arg->set_name("v");
      WalkOps(fn->body(), [](Operation* op) {
        for (Value* r : op->results()) r->set_name("v");
      });
    }
  }
  const ForwardCopy copy = MatchForwardCopy(f, *grad->function);
  // The gradient function's forward part is the forward, op for op.
  EXPECT_EQ(static_cast<int>(copy.ops.size()), TopLevelOps(f));
  for (const auto& [grad_op, forward_op] : copy.ops) {
    EXPECT_EQ(grad_op->kind(), forward_op->kind());
    EXPECT_EQ(forward_op->parent_function(), &f);
    EXPECT_EQ(grad_op->parent_function(), grad->function);
  }
  ASSERT_FALSE(grad->saved.empty());
  for (const auto& [forward_value, reads] : grad->saved) {
    for (const BackwardRead& read : reads) {
      EXPECT_FALSE(copy.Recomputes(read.user) && !read.user->Is(OpKind::kReturn));
      auto it = copy.values.find(read.value);
      if (it != copy.values.end()) {
        EXPECT_EQ(it->second, forward_value);
        continue;
      }
      // Not a forward value: the log-sum-exp the attention's copy returns beyond it.
      ASSERT_EQ(read.value->kind(), Value::Kind::kResult);
      const Operation* def = read.value->defining_op();
      ASSERT_TRUE(def->Is(OpKind::kAttention));
      ASSERT_TRUE(copy.ops.contains(def));
      EXPECT_EQ(copy.ops.at(def)->result(0), forward_value);
    }
  }
}

TEST(ForwardCopyTest, MlpMatchesAutodiffsCopy) { ExpectMatchesAutodiff(kMlp, false); }
TEST(ForwardCopyTest, AttentionMatchesAutodiffsCopy) { ExpectMatchesAutodiff(kAttention, false); }
TEST(ForwardCopyTest, NamesPlayNoPart) {
  ExpectMatchesAutodiff(kMlp, true);
  ExpectMatchesAutodiff(kAttention, true);
}

// An op of the gradient that computes something the forward does not is not matched,
// even when it reads only forward values and has a forward value's name.
TEST(ForwardCopyTest, BackwardOpsAreNotMatched) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(
func @f(%x: f32[4]) -> f32[4] {
  %t = tanh(%x)
  return %t
}

func @f_grad(%x: f32[4], %d: f32[4]) -> (f32[4], f32[4]) {
  %t = tanh(%x)
  %s = mul(%t, %t)
  %t2 = tanh(%x)
  %g = sub(1.0, %s)
  %dx = mul(%d, %g)
  return %t, %dx
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  const Function& g = *module->FindFunction("f_grad");
  const ForwardCopy copy = MatchForwardCopy(f, g);
  std::vector<const Operation*> ops;
  for (const Operation* op : *g.body()) ops.push_back(op);
  EXPECT_TRUE(copy.Recomputes(ops[0]));
  EXPECT_FALSE(copy.Recomputes(ops[1]));  // mul: not in the forward
  EXPECT_FALSE(copy.Recomputes(ops[2]));  // a second tanh: the forward has one
  EXPECT_EQ(copy.values.at(ops[0]->result(0)), f.body()->front()->result(0));
  EXPECT_EQ(copy.values.at(g.body()->argument(0)), f.body()->argument(0));
  EXPECT_FALSE(copy.values.contains(g.body()->argument(1)));  // the cotangent
}

}  // namespace
}  // namespace commir
