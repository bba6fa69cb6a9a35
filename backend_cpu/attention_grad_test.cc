// attention_grad against central finite differences of the forward kernel, in f64.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;

struct Case {
  int64_t batch, heads, kv_heads, queries, keys, head_dim, value_dim;
  AttentionOptions options;
};

struct Inputs {
  Tensor q, k, v, dout;
};

Inputs RandomInputs(const Case& c, ElementType type, uint32_t seed) {
  return {RandomTensor(type, {c.batch, c.heads, c.queries, c.head_dim}, seed),
          RandomTensor(type, {c.batch, c.kv_heads, c.keys, c.head_dim}, seed + 1),
          RandomTensor(type, {c.batch, c.kv_heads, c.keys, c.value_dim}, seed + 2),
          RandomTensor(type, {c.batch, c.heads, c.queries, c.value_dim}, seed + 3)};
}

Tensor AsF64(const Tensor& t) { return Tensor::FromDouble(ElementType::kF64, t.shape(), t.ToDouble()); }

// sum(dout * attention(q, k, v)) in f64: its gradient is the vector-Jacobian product
// attention_grad computes.
double Loss(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<double>& dout,
            const AttentionOptions& options) {
  absl::StatusOr<AttentionResult> forward = Attention(q, k, v, options);
  EXPECT_TRUE(forward.ok()) << forward.status();
  const std::vector<double> o = forward->output.ToDouble();
  double loss = 0;
  for (size_t i = 0; i < o.size(); ++i) loss += o[i] * dout[i];
  return loss;
}

// The gradient of Loss with respect to operand `which` (0 q, 1 k, 2 v) by central
// differences, everything in f64.
std::vector<double> FiniteDifferences(const Inputs& f64, int which, const AttentionOptions& options) {
  constexpr double kStep = 1e-5;
  const std::vector<double> dout = f64.dout.ToDouble();
  Tensor operands[3] = {f64.q, f64.k, f64.v};
  std::vector<double> grad(operands[which].num_elements());
  const std::vector<double> base = operands[which].ToDouble();
  for (size_t i = 0; i < grad.size(); ++i) {
    operands[which].SetFromDouble(i, base[i] + kStep);
    const double up = Loss(operands[0], operands[1], operands[2], dout, options);
    operands[which].SetFromDouble(i, base[i] - kStep);
    const double down = Loss(operands[0], operands[1], operands[2], dout, options);
    operands[which].SetFromDouble(i, base[i]);
    grad[i] = (up - down) / (2 * kStep);
  }
  return grad;
}

// Runs the forward in `type`, then attention_grad in `type`, and compares dq, dk and dv
// with the finite differences of the f64 forward at the same (rounded) inputs.
void CheckAgainstFiniteDifferences(const Case& c, ElementType type, double rtol, double atol) {
  const Inputs in = RandomInputs(c, type, 7);
  absl::StatusOr<AttentionResult> forward = Attention(in.q, in.k, in.v, c.options);
  ASSERT_TRUE(forward.ok()) << forward.status();
  absl::StatusOr<AttentionGradResult> grad =
      AttentionGrad(in.q, in.k, in.v, forward->output, forward->lse, in.dout, c.options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  const Inputs f64{AsF64(in.q), AsF64(in.k), AsF64(in.v), AsF64(in.dout)};
  const Tensor* results[3] = {&grad->dq, &grad->dk, &grad->dv};
  const Tensor* operands[3] = {&in.q, &in.k, &in.v};
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which == 0 ? "dq" : which == 1 ? "dk" : "dv");
    ExpectTensorNear(*results[which], type, operands[which]->shape(),
                     FiniteDifferences(f64, which, c.options), rtol, atol);
  }
}

AttentionOptions Options(bool causal, std::optional<int64_t> q_pos = std::nullopt,
                         int64_t k_pos = 0, std::optional<double> scale = std::nullopt) {
  AttentionOptions options;
  options.causal = causal;
  options.q_pos = q_pos;
  options.k_pos = k_pos;
  options.scale = scale;
  return options;
}

// In f64 the kernel is exact up to rounding, so the only error left is the finite
// differences' (about step^2 and 1e-16 / step).
constexpr double kF64Tolerance = 1e-8;

TEST(AttentionGradTest, F64MatchesFiniteDifferences) {
  CheckAgainstFiniteDifferences({2, 2, 2, 5, 7, 3, 4, Options(false)}, ElementType::kF64,
                                kF64Tolerance, kF64Tolerance);
}

TEST(AttentionGradTest, F64CausalMatchesFiniteDifferences) {
  CheckAgainstFiniteDifferences({1, 2, 2, 6, 6, 4, 3, Options(true)}, ElementType::kF64,
                                kF64Tolerance, kF64Tolerance);
}

TEST(AttentionGradTest, F64GroupedQueryHeadsSumOverTheGroup) {
  CheckAgainstFiniteDifferences({2, 6, 2, 4, 5, 3, 3, Options(true)}, ElementType::kF64,
                                kF64Tolerance, kF64Tolerance);
}

// Positions where the first two queries see no key (their rows add nothing) and a written
// scale.
TEST(AttentionGradTest, F64PositionsAndScale) {
  CheckAgainstFiniteDifferences({1, 4, 2, 5, 6, 3, 2, Options(true, 10, 12, 0.7)},
                                ElementType::kF64, kF64Tolerance, kF64Tolerance);
}

// More queries than one block (64), so the per-block recomputation and the accumulation
// of dk and dv across blocks are exercised.
TEST(AttentionGradTest, F64SeveralQueryBlocks) {
  CheckAgainstFiniteDifferences({1, 1, 1, 70, 9, 2, 2, Options(true, 3)}, ElementType::kF64,
                                kF64Tolerance, kF64Tolerance);
}

// f32 and bf16 inputs, computed in f32: the f64 vector-Jacobian product of the forward at
// the same inputs, to the type's rounding.
TEST(AttentionGradTest, F32MatchesTheF64Product) {
  CheckAgainstFiniteDifferences({2, 4, 2, 5, 7, 4, 3, Options(true, 3, 1)}, ElementType::kF32,
                                1e-4, 1e-5);
}

TEST(AttentionGradTest, Bf16MatchesTheF64Product) {
  // o and lse are rounded to bf16 / f32 before the backward reads them: a few bf16 ulps.
  CheckAgainstFiniteDifferences({1, 2, 1, 4, 6, 4, 4, Options(false)}, ElementType::kBF16, 3e-2,
                                2e-2);
}

TEST(AttentionGradTest, QueriesThatSeeNoKeyHaveZeroGradient) {
  const Case c{1, 1, 1, 3, 4, 2, 2, Options(true, 0, 5)};  // every key after every query
  const Inputs in = RandomInputs(c, ElementType::kF32, 3);
  absl::StatusOr<AttentionResult> forward = Attention(in.q, in.k, in.v, c.options);
  ASSERT_TRUE(forward.ok());
  absl::StatusOr<AttentionGradResult> grad =
      AttentionGrad(in.q, in.k, in.v, forward->output, forward->lse, in.dout, c.options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  ExpectTensorNear(grad->dq, ElementType::kF32, {1, 1, 3, 2}, std::vector<double>(6, 0.0), 0, 0);
  ExpectTensorNear(grad->dk, ElementType::kF32, {1, 1, 4, 2}, std::vector<double>(8, 0.0), 0, 0);
  ExpectTensorNear(grad->dv, ElementType::kF32, {1, 1, 4, 2}, std::vector<double>(8, 0.0), 0, 0);
}

TEST(AttentionGradTest, BadOperandsAreErrors) {
  const Case c{1, 2, 1, 3, 4, 2, 2, Options(false)};
  const Inputs in = RandomInputs(c, ElementType::kF32, 5);
  const Tensor o = RandomTensor(ElementType::kF32, {1, 2, 3, 2}, 9);
  const Tensor lse = RandomTensor(ElementType::kF32, {1, 2, 3}, 10);
  ExpectInvalidArgument(
      AttentionGrad(in.q, in.k, in.v, o, RandomTensor(ElementType::kF32, {1, 2, 4}, 1), in.dout,
                    c.options)
          .status(),
      {"attention_grad", "lse f32 [B, H, Sq]"});
  ExpectInvalidArgument(
      AttentionGrad(in.q, in.k, in.v, o, RandomTensor(ElementType::kF64, {1, 2, 3}, 1), in.dout,
                    c.options)
          .status(),
      {"attention_grad"});
  ExpectInvalidArgument(
      AttentionGrad(in.q, in.k, in.v, o, lse, RandomTensor(ElementType::kF32, {1, 2, 3, 3}, 1),
                    c.options)
          .status(),
      {"attention_grad", "dout"});
  ExpectInvalidArgument(
      AttentionGrad(in.q, in.k, in.v, o, lse, RandomTensor(ElementType::kI32, {1, 2, 3, 2}, 1),
                    c.options)
          .status(),
      {"attention_grad"});
}

}  // namespace
}  // namespace commir::cpu
