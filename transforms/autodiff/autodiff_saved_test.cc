// What autodiff reports the backward keeps of the forward (DifferentiateWithSaved): on a
// two-layer MLP the saved activations derived by hand from the matmul and relu rules, and
// flash attention's (its inputs, output and log-sum-exp).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

// y = relu(x w1) w2, with u = x w1 and a = relu(u).
constexpr char kMlp[] = R"(func @mlp(%x: f32[4, 8], %w1: f32[8, 16], %w2: f32[16, 8]) -> f32[4, 8] {
  %u = matmul(%x, %w1) : f32[4, 16]
  %a = relu(%u)
  %y = matmul(%a, %w2) : f32[4, 8]
  return %y
})";

// The forward value each saved entry is, as "x" (argument) or "u" (op result), looked up
// by pointer among @mlp's own values; also checks every read is of @mlp_grad and by an op
// outside the forward copy.
std::set<std::string> SavedActivations(const std::vector<std::string>& wrt) {
  std::unique_ptr<Module> module = testing::ParseForTest(kMlp);
  EXPECT_NE(module, nullptr);
  if (module == nullptr) return {};
  const Function& f = *module->FindFunction("mlp");
  AutodiffOptions options;
  options.seed_cotangents = true;
  options.wrt = wrt;
  absl::StatusOr<Gradient> grad = DifferentiateWithSaved(*module, f, options);
  EXPECT_TRUE(grad.ok()) << grad.status();
  if (!grad.ok()) return {};
  EXPECT_EQ(grad->function, module->FindFunction("mlp_grad"));

  std::vector<std::pair<const Value*, std::string>> forward_values;
  for (const Value* arg : f.body()->arguments()) forward_values.push_back({arg, arg->name()});
  for (const Operation* op : *f.body()) {
    for (const Value* r : op->results()) forward_values.push_back({r, r->name()});
  }
  std::set<std::string> saved;
  for (const auto& [value, reads] : grad->saved) {
    std::string name = "(not a value of @mlp)";
    for (const auto& [v, n] : forward_values) {
      if (v == value) name = n;
    }
    saved.insert(name);
    EXPECT_FALSE(reads.empty()) << name;
    for (const BackwardRead& read : reads) {
      const Block* block = read.value->kind() == Value::Kind::kBlockArgument
                               ? read.value->owner_block()
                               : read.value->defining_op()->parent_block();
      EXPECT_EQ(block, grad->function->body()) << name;
      EXPECT_EQ(read.user->parent_block(), grad->function->body()) << name;
      // The forward copy of @mlp_grad is its first three ops (u, a, y).
      int position = 0;
      for (const Operation* op : *grad->function->body()) {
        if (op == read.user) break;
        ++position;
      }
      EXPECT_GE(position, 3) << name << " is read by forward op " << read.user->name();
    }
  }
  return saved;
}

TEST(AutodiffSaved, EveryWeightKeepsTheInputsOfItsMatmulAndRelu) {
  // dW2 = a^T dy reads a; da = dy w2^T reads w2; du = (u > 0) da reads u (relu's rule
  // reads its operand, not its result); dW1 = x^T du reads x; dx = du w1^T reads w1.
  // y itself is only returned as @mlp's result.
  EXPECT_EQ(SavedActivations({}), (std::set<std::string>{"x", "w1", "w2", "u", "a"}));
}

TEST(AutodiffSaved, OnlyWhatTheRequestedGradientsRead) {
  // d w1 alone: da, du and dW1 (w2, u, x); dx and dW2 are removed as dead code, so w1
  // and a are not kept.
  EXPECT_EQ(SavedActivations({"w1"}), (std::set<std::string>{"x", "w2", "u"}));
  // d w2 alone: dW2 = a^T dy.
  EXPECT_EQ(SavedActivations({"w2"}), (std::set<std::string>{"a"}));
}

// Flash attention's backward (FlashAttention-2, Dao 2023, Algorithm 2) reads q, k, v,
// the output o and the row log-sum-exp: the lse that autodiff adds to the forward's copy
// is filed under o, beside o itself.
TEST(AutodiffSaved, AttentionKeepsItsInputsOutputAndLogSumExp) {
  std::unique_ptr<Module> module = testing::ParseForTest(
      R"(func @f(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> f32[1, 2, 4, 8] {
  %o = attention(%q, %k, %v) {causal}
  return %o
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  AutodiffOptions options;
  options.seed_cotangents = true;
  absl::StatusOr<Gradient> grad = DifferentiateWithSaved(*module, f, options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  const Value* o = f.body()->front()->result(0);
  ASSERT_EQ(grad->saved.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(grad->saved.contains(f.body()->argument(i))) << i;
    EXPECT_EQ(grad->saved.at(f.body()->argument(i)).size(), 1u);
  }
  ASSERT_TRUE(grad->saved.contains(o));
  const std::vector<BackwardRead>& reads = grad->saved.at(o);
  ASSERT_EQ(reads.size(), 2u);
  // Both read by the one attention_grad, as two results of the attention's copy.
  const Operation* copy = reads[0].value->defining_op();
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(copy->Is(OpKind::kAttention));
  EXPECT_EQ(copy->num_results(), 2);
  EXPECT_EQ(reads[1].value->defining_op(), copy);
  EXPECT_NE(reads[0].value, reads[1].value);
  EXPECT_TRUE(reads[0].user->Is(OpKind::kAttentionGrad));
  EXPECT_EQ(reads[1].user, reads[0].user);
}

}  // namespace
}  // namespace commir
