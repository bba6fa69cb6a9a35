#include "commir/scalar_math.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace commir::scalar_math {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ScalarMathTest, FloorDivRoundsTowardNegativeInfinity) {
  EXPECT_EQ(FloorDiv(7, 2), 3);
  EXPECT_EQ(FloorDiv(-7, 2), -4);
  EXPECT_EQ(FloorDiv(7, -2), -4);
  EXPECT_EQ(FloorDiv(-7, -2), 3);
  EXPECT_EQ(FloorDiv(-6, 2), -3);  // exact: no adjustment
  EXPECT_EQ(FloorDiv(0, -5), 0);
  EXPECT_EQ(FloorDiv(kMin, 1), kMin);
  EXPECT_EQ(FloorDiv(kMin, 2), kMin / 2);
  EXPECT_EQ(FloorDiv(kMax, -1), -kMax);
}

TEST(ScalarMathTest, FloorRemHasTheSignOfTheDivisor) {
  EXPECT_EQ(FloorRem(7, 2), 1);
  EXPECT_EQ(FloorRem(-7, 2), 1);
  EXPECT_EQ(FloorRem(7, -2), -1);
  EXPECT_EQ(FloorRem(-7, -2), -1);
  EXPECT_EQ(FloorRem(-6, 3), 0);
  EXPECT_EQ(FloorRem(kMin, -1), 0);  // the quotient overflows, the remainder does not
  EXPECT_EQ(FloorRem(kMin, kMax), kMax - 1);
  for (int64_t a = -9; a <= 9; ++a) {
    for (int64_t b : {-4, -3, -1, 1, 2, 5}) {
      EXPECT_EQ(FloorDiv(a, b) * b + FloorRem(a, b), a) << a << " " << b;
    }
  }
}

TEST(ScalarMathTest, WrappingFloorDivWrapsTheOneOverflowingQuotient) {
  EXPECT_EQ(WrappingFloorDiv(kMin, -1), kMin);
  EXPECT_EQ(WrappingFloorDiv(-7, 2), -4);
}

TEST(ScalarMathTest, WrappingArithmeticIsModulo2To64) {
  EXPECT_EQ(WrappingAdd(kMax, 1), kMin);
  EXPECT_EQ(WrappingSub(kMin, 1), kMax);
  EXPECT_EQ(WrappingMul(kMax, 2), -2);
  EXPECT_EQ(WrappingMul(kMin, -1), kMin);
  EXPECT_EQ(WrappingNeg(kMin), kMin);
  EXPECT_EQ(WrappingAbs(kMin), kMin);
  EXPECT_EQ(WrappingAbs(-5), 5);
  EXPECT_EQ(WrappingPow(3, 4), 81);
  EXPECT_EQ(WrappingPow(-2, 63), kMin);
  EXPECT_EQ(WrappingPow(2, 64), 0);
  EXPECT_EQ(WrappingPow(7, 0), 1);
}

TEST(ScalarMathTest, MaxMinPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(Max(nan, 1.0)));
  EXPECT_TRUE(std::isnan(Max(1.0, nan)));
  EXPECT_TRUE(std::isnan(Min(nan, 1.0)));
  EXPECT_TRUE(std::isnan(Min(1.0f, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(Max(2.0, 3.0), 3.0);
  EXPECT_EQ(Min(2.0, 3.0), 2.0);
  EXPECT_TRUE(std::signbit(Max(-0.0, 0.0)));  // equal: the first operand, as std::max
  EXPECT_EQ(Max<int64_t>(kMin, 4), 4);
  EXPECT_EQ(Min<int64_t>(kMin, 4), kMin);
}

TEST(ScalarMathTest, ReluKeepsNan) {
  EXPECT_TRUE(std::isnan(Relu(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(Relu(-2.5), 0.0);
  EXPECT_EQ(Relu(2.5f), 2.5f);
  EXPECT_EQ(Relu<int64_t>(kMin), 0);
}

TEST(ScalarMathTest, SigmoidSaturatesWithoutOverflow) {
  EXPECT_EQ(Sigmoid(0.0), 0.5);
  EXPECT_EQ(Sigmoid(1000.0), 1.0);
  EXPECT_EQ(Sigmoid(-1000.0), 0.0);
  EXPECT_EQ(Sigmoid(100.0f), 1.0f);
  // For large negative x the result is e^x, not 0 from 1 - 1.
  EXPECT_NEAR(Sigmoid(-30.0) / std::exp(-30.0), 1.0, 1e-12);
  EXPECT_GT(Sigmoid(-80.0f), 0.0f);
  EXPECT_NEAR(Sigmoid(2.0), 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
}

// The f64 textbook formulas the rewritten gelu forms must agree with.
double GeluErfReference(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double GeluTanhReference(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

TEST(ScalarMathTest, GeluFormsMatchTheirFormulas) {
  for (double x : {-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 5.0}) {
    EXPECT_NEAR(GeluErf(x), GeluErfReference(x), 1e-15) << x;
    EXPECT_NEAR(GeluTanh(x), GeluTanhReference(x), 1e-15) << x;
    EXPECT_NEAR(GeluErf(static_cast<float>(x)), GeluErfReference(x), 1e-6) << x;
    EXPECT_NEAR(GeluTanh(static_cast<float>(x)), GeluTanhReference(x), 1e-6) << x;
  }
  // Far in the negative tail the textbook forms cancel to 0; the rewritten ones keep the
  // tiny negative value.
  EXPECT_LT(GeluErf(-10.0), 0.0);
  EXPECT_LT(GeluTanh(-10.0), 0.0);
}

TEST(ScalarMathTest, ElementaryFunctions) {
  EXPECT_EQ(Neg(2.0), -2.0);
  EXPECT_EQ(Abs(-2.0f), 2.0f);
  EXPECT_EQ(Exp(0.0), 1.0);
  EXPECT_EQ(Log(1.0), 0.0);
  EXPECT_EQ(Sqrt(4.0), 2.0);
  EXPECT_EQ(Rsqrt(4.0), 0.5);
  EXPECT_EQ(Tanh(0.0), 0.0);
  EXPECT_EQ(Silu(0.0), 0.0);
  EXPECT_NEAR(Silu(1.0), 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(Add(1.0, 2.0), 3.0);
  EXPECT_EQ(Sub(1.0, 2.0), -1.0);
  EXPECT_EQ(Mul(3.0, 2.0), 6.0);
  EXPECT_EQ(Div(1.0, 4.0), 0.25);
  EXPECT_EQ(Pow(2.0, 10.0), 1024.0);
}

TEST(ScalarMathTest, ApplyDispatchesToTheNamedFunctions) {
  EXPECT_EQ(ApplyFloat(ElementwiseFn::kSilu, 1.5), Silu(1.5));
  EXPECT_EQ(ApplyFloat(ElementwiseFn::kGeluTanh, 0.7f), GeluTanh(0.7f));
  EXPECT_EQ(ApplyFloat(ElementwiseFn::kPow, 2.0, 10.0), 1024.0);
  EXPECT_TRUE(std::isnan(ApplyFloat(ElementwiseFn::kLt, 1.0, 2.0)));  // not arithmetic
  EXPECT_EQ(ApplyInteger(ElementwiseFn::kDiv, -7, 2).value, -4);
  EXPECT_EQ(ApplyInteger(ElementwiseFn::kDiv, 1, 0).fault, IntegerFault::kDivisionByZero);
  EXPECT_EQ(ApplyInteger(ElementwiseFn::kPow, 3, -1).fault, IntegerFault::kNegativeExponent);
  EXPECT_EQ(ApplyInteger(ElementwiseFn::kExp, 1).fault, IntegerFault::kFloatOnly);
  EXPECT_EQ(ApplyInteger(ElementwiseFn::kNeg, std::numeric_limits<int64_t>::min()).value,
            std::numeric_limits<int64_t>::min());  // wraps
}

TEST(ScalarMathTest, CompareFollowsIeeeAndSelectChooses) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(Compare(ElementwiseFn::kLe, 1.0, 1.0));
  EXPECT_FALSE(Compare(ElementwiseFn::kLt, 1.0, 1.0));
  EXPECT_FALSE(Compare(ElementwiseFn::kEq, nan, nan));
  EXPECT_TRUE(Compare(ElementwiseFn::kNe, nan, nan));
  EXPECT_FALSE(Compare(ElementwiseFn::kGe, nan, 0.0));
  EXPECT_TRUE(Compare(ElementwiseFn::kGt, int64_t{3}, int64_t{-3}));
  EXPECT_EQ(Select(true, 1, 2), 1);
  EXPECT_EQ(Select(false, 1, 2), 2);
}

}  // namespace
}  // namespace commir::scalar_math
