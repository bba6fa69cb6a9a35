// The autodiff pass: what it refuses (with located errors), what it prunes, the
// vector-Jacobian product of seed=cotangents and a bf16 forward with f32 gradients.
#include "transforms/autodiff/autodiff.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "testing/gradient_check.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

struct Refusal {
  std::string message;
  int line = 0;
};

Refusal Refuse(const std::string& text, AutodiffOptions options = {}) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return {"did not parse", 0};
  DiagnosticEngine diagnostics;
  absl::StatusOr<Function*> grad =
      Differentiate(*module, *module->functions().front(), options, &diagnostics);
  if (grad.ok()) return {"accepted", 0};
  std::vector<Diagnostic> sorted = diagnostics.Sorted();
  if (sorted.empty()) return {std::string(grad.status().message()), 0};
  return {sorted[0].message, sorted[0].loc.line};
}

TEST(AutodiffRefusesTest, IntegerArgumentNamedInWrt) {
  AutodiffOptions options;
  options.wrt = {"n"};
  Refusal r = Refuse(R"(func @f(%x: f32[4],
        %n: i32[4]) -> f32[] {
  %loss = reduce_sum(%x) {dims = [0]}
  return %loss
})",
                     options);
  EXPECT_THAT(r.message, HasSubstr("cannot differentiate with respect to %n"));
  EXPECT_EQ(r.line, 2);
}

TEST(AutodiffRefusesTest, GradientThroughAnIntegerValue) {
  Refusal r = Refuse(R"(func @f(%x: f32[4]) -> f32[] {
  %i = convert(%x) : i32[4]
  %y = convert(%i) : f32[4]
  %loss = reduce_sum(%y) {dims = [0]}
  return %loss
})");
  EXPECT_THAT(r.message, HasSubstr("cannot flow through 'convert'"));
  EXPECT_EQ(r.line, 2);
}

TEST(AutodiffRefusesTest, NonScalarLoss) {
  Refusal r = Refuse(R"(func @f(%x: f32[4]) -> f32[4] {
  %y = exp(%x)
  return %y
})");
  EXPECT_THAT(r.message, HasSubstr("first result must be a float scalar"));
  EXPECT_EQ(r.line, 1);
}

TEST(AutodiffRefusesTest, UnknownWrtNameAndExistingGradient) {
  const std::string text = R"(func @f(%x: f32[4]) -> f32[] {
  %loss = reduce_sum(%x) {dims = [0]}
  return %loss
}
func @f_grad(%x: f32[4]) -> f32[] {
  %loss = reduce_sum(%x) {dims = [0]}
  return %loss
})";
  EXPECT_THAT(Refuse(text).message, HasSubstr("@f_grad exists already"));
  AutodiffOptions options;
  options.wrt = {"w"};
  Refusal r = Refuse(text.substr(0, text.find("func @f_grad")), options);
  EXPECT_THAT(r.message, HasSubstr("wrt names %w"));
  EXPECT_EQ(r.line, 1);
}

// Only values that depend on a differentiated argument get backward work: with wrt=w,
// the activations' cotangent is needed, x's is not, so the backward has one matmul.
TEST(AutodiffTest, PrunesWorkForUndifferentiatedValues) {
  std::unique_ptr<Module> module =
      testing::ParseForTest(R"(func @f(%x: f32[8, 4], %w: f32[4, 2]) -> f32[] {
  %e = exp(%x)
  %y = matmul(%e, %w)
  %loss = reduce_sum(%y) {dims = [0, 1]}
  return %loss
})");
  ASSERT_NE(module, nullptr);
  AutodiffOptions options;
  options.wrt = {"w"};
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->functions().front(), options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  int matmuls = 0, exps = 0;
  for (Operation* op : *(*grad)->body()) {
    matmuls += op->Is(OpKind::kMatmul);
    exps += op->Is(OpKind::kExp);
  }
  EXPECT_EQ(matmuls, 2) << PrintFunction(**grad);  // forward + dW
  EXPECT_EQ(exps, 1) << PrintFunction(**grad);     // forward only
  EXPECT_EQ((*grad)->result_types().size(), 2u);
}

// seed=cotangents: @f_grad(x, c0, c1) returns c0 . d r0/dx + c1 . d r1/dx, which is the
// gradient of sum(r0 c0) + sum(r1 c1) written out by hand.
TEST(AutodiffTest, CotangentSeedIsAVectorJacobianProduct) {
  const std::string body = R"(
  %r0 = tanh(%x)
  %m = matmul(%x, %x) {transpose_b}
  %r1 = softmax(%m))";
  std::unique_ptr<Module> vjp_module = testing::ParseForTest(
      "func @f(%x: f64[3, 4]) -> (f64[3, 4], f64[3, 3]) {" + body + "\n  return %r0, %r1\n}");
  std::unique_ptr<Module> loss_module = testing::ParseForTest(
      "func @l(%x: f64[3, 4], %c0: f64[3, 4], %c1: f64[3, 3]) -> f64[] {" + body + R"(
  %p0 = mul(%r0, %c0)
  %p1 = mul(%r1, %c1)
  %s0 = reduce_sum(%p0) {dims = [0, 1]}
  %s1 = reduce_sum(%p1) {dims = [0, 1]}
  %loss = add(%s0, %s1)
  return %loss
})");
  ASSERT_NE(vjp_module, nullptr);
  ASSERT_NE(loss_module, nullptr);
  AutodiffOptions vjp_options;
  vjp_options.seed_cotangents = true;
  absl::StatusOr<Function*> vjp =
      Differentiate(*vjp_module, *vjp_module->FindFunction("f"), vjp_options);
  ASSERT_TRUE(vjp.ok()) << vjp.status();
  ASSERT_EQ((*vjp)->arg_types().size(), 3u);
  AutodiffOptions loss_options;
  loss_options.wrt = {"x"};
  absl::StatusOr<Function*> grad =
      Differentiate(*loss_module, *loss_module->FindFunction("l"), loss_options);
  ASSERT_TRUE(grad.ok()) << grad.status();

  std::vector<runtime::Tensor> inputs = testing::UniformInputs(**grad, -1, 1, 7);
  absl::StatusOr<std::vector<runtime::Tensor>> from_vjp =
      testing::RunWithGlobalInputs(**vjp, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> from_loss =
      testing::RunWithGlobalInputs(**grad, inputs);
  ASSERT_TRUE(from_vjp.ok()) << from_vjp.status();
  ASSERT_TRUE(from_loss.ok()) << from_loss.status();
  ASSERT_EQ(from_vjp->size(), 3u);
  std::string report;
  EXPECT_TRUE(testing::CompareResults({(*from_vjp)[2]}, {(*from_loss)[1]}, &report)) << report;
}

// A bf16 forward with f32 gradients: the gradients are f32, and agree with the gradient
// of the same program in f32 (on the same, bf16-representable, inputs) to bf16's
// precision of the forward values; without grad-type they are bf16.
TEST(AutodiffTest, Bf16ForwardWithF32Gradients) {
  auto program = [](const std::string& et) {
    return "func @f(%x: " + et + "[8, 16], %w: " + et +
           "[16, 4]) -> f32[] {\n"
           "  %h = matmul(%x, %w)\n"
           "  %a = gelu(%h)\n"
           "  %a32 = convert(%a) : f32[8, 4]\n"
           "  %sq = mul(%a32, %a32)\n"
           "  %loss = reduce_mean(%sq) {dims = [0, 1]}\n"
           "  return %loss\n}\n";
  };
  std::unique_ptr<Module> low = testing::ParseForTest(program("bf16"));
  std::unique_ptr<Module> high = testing::ParseForTest(
      "func @f(%x: f32[8, 16], %w: f32[16, 4]) -> f32[] {\n"
      "  %h = matmul(%x, %w)\n  %a = gelu(%h)\n  %sq = mul(%a, %a)\n"
      "  %loss = reduce_mean(%sq) {dims = [0, 1]}\n  return %loss\n}\n");
  ASSERT_NE(low, nullptr);
  ASSERT_NE(high, nullptr);
  AutodiffOptions f32_grads;
  f32_grads.grad_type = ElementType::kF32;
  absl::StatusOr<Function*> low_grad = Differentiate(*low, *low->FindFunction("f"), f32_grads);
  absl::StatusOr<Function*> high_grad = Differentiate(*high, *high->FindFunction("f"), {});
  ASSERT_TRUE(low_grad.ok()) << low_grad.status();
  ASSERT_TRUE(high_grad.ok()) << high_grad.status();
  EXPECT_EQ((*low_grad)->result_types()[1].element_type(), ElementType::kF32);
  EXPECT_EQ((*low_grad)->result_types()[2].element_type(), ElementType::kF32);
  EXPECT_TRUE(VerifyModule(*low).ok());

  // bf16 inputs, and the same values in f32.
  std::vector<runtime::Tensor> low_inputs = testing::UniformInputs(**low_grad, -1, 1, 3);
  std::vector<runtime::Tensor> high_inputs;
  for (const runtime::Tensor& t : low_inputs) {
    high_inputs.push_back(runtime::Tensor::FromDouble(ElementType::kF32, t.shape(), t.ToDouble()));
  }
  absl::StatusOr<std::vector<runtime::Tensor>> got =
      testing::RunWithGlobalInputs(**low_grad, low_inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> want =
      testing::RunWithGlobalInputs(**high_grad, high_inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  for (int r : {1, 2}) {
    std::vector<double> g = (*got)[r].ToDouble();
    std::vector<double> w = (*want)[r].ToDouble();
    double num = 0, den = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      num += (g[i] - w[i]) * (g[i] - w[i]);
      den += w[i] * w[i];
    }
    EXPECT_LT(std::sqrt(num / den), 2e-2) << "gradient " << r;
  }

  std::unique_ptr<Module> same = testing::ParseForTest(program("bf16"));
  ASSERT_NE(same, nullptr);
  absl::StatusOr<Function*> same_grad = Differentiate(*same, *same->FindFunction("f"), {});
  ASSERT_TRUE(same_grad.ok()) << same_grad.status();
  EXPECT_EQ((*same_grad)->result_types()[1].element_type(), ElementType::kBF16);
}

}  // namespace
}  // namespace commir

namespace commir {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Slices that tile a value along one dimension: its cotangent is theirs side by side,
// one concat (no zero padding per slice and no sum of the padded cotangents), zeros for
// a block the loss does not read. Checked against the closed form: for
// loss = sum(s0 * a) + sum(s1 * b), dx = [a, b, 0].
TEST(AutodiffTest, SlicesThatTileAValueJoinTheirCotangentsWithOneConcat) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(
func @l(%x: f64[3, 6], %a: f64[3, 1], %b: f64[3, 2]) -> f64[] {
  %s1 = slice(%x) {start = [0, 1], size = [3, 2]}
  %s2 = slice(%x) {start = [0, 3], size = [3, 3]}
  %s0 = slice(%x) {start = [0, 0], size = [3, 1]}
  %p0 = mul(%s0, %a)
  %p1 = mul(%s1, %b)
  %t2 = tanh(%s2)
  %r0 = reduce_sum(%p0) {dims = [0, 1]}
  %r1 = reduce_sum(%p1) {dims = [0, 1]}
  %loss = add(%r0, %r1)
  return %loss
})");
  std::unique_ptr<Module> expected = testing::ParseForTest(R"(
func @e(%x: f64[3, 6], %a: f64[3, 1], %b: f64[3, 2]) -> f64[3, 6] {
  %z = full() {value = 0.0} : f64[3, 3]
  %dx = concat(%a, %b, %z) {dim = 1}
  return %dx
})");
  ASSERT_NE(module, nullptr);
  ASSERT_NE(expected, nullptr);
  AutodiffOptions options;
  options.wrt = {"x"};
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("l"), options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  const std::string text = PrintFunction(**grad);
  EXPECT_EQ(Count(text, "concat("), 1) << text;

  std::vector<runtime::Tensor> inputs = testing::UniformInputs(**grad, -1, 1, 11);
  absl::StatusOr<std::vector<runtime::Tensor>> got = testing::RunWithGlobalInputs(**grad, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> want =
      testing::RunWithGlobalInputs(*expected->FindFunction("e"), inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), 2u);
  std::string report;
  EXPECT_TRUE(testing::CompareResults({(*got)[1]}, {(*want)[0]}, &report)) << report;
}

// Slices that overlap, or leave part of the value unread, keep their own rules.
TEST(AutodiffTest, SlicesThatDoNotTileKeepTheirPaddedCotangents) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(
func @l(%x: f64[3, 6]) -> f64[] {
  %s0 = slice(%x) {start = [0, 0], size = [3, 4]}
  %s1 = slice(%x) {start = [0, 2], size = [3, 4]}
  %r0 = reduce_sum(%s0) {dims = [0, 1]}
  %r1 = reduce_sum(%s1) {dims = [0, 1]}
  %loss = add(%r0, %r1)
  return %loss
})");
  ASSERT_NE(module, nullptr);
  AutodiffOptions options;
  options.wrt = {"x"};
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("l"), options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  // Each slice's rule pads its cotangent (a concat each), and the two are summed.
  EXPECT_EQ(Count(PrintFunction(**grad), "concat("), 2);
}

}  // namespace
}  // namespace commir
