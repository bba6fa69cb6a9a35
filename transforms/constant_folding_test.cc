#include "transforms/constant_folding.h"

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>

#include "commir/deterministic_math.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

const Type kF64 = Type::Scalar(ElementType::kF64);
const Type kF32 = Type::Scalar(ElementType::kF32);
const Type kF16 = Type::Scalar(ElementType::kF16);
const Type kBF16 = Type::Scalar(ElementType::kBF16);
const Type kI64 = Type::Scalar(ElementType::kI64);
const Type kI32 = Type::Scalar(ElementType::kI32);
const Type kI1 = Type::Scalar(ElementType::kI1);

Scalar F(double f) { return Scalar{f, 0}; }
Scalar I(int64_t i) { return Scalar{0, i}; }

// A detached op of `kind`, for FoldUnary (which reads attributes such as gelu's).
std::unique_ptr<Operation> MakeOp(OpKind kind, AttrDict attrs = {}) {
  return Operation::Create(GetOpDef(kind), {}, {}, std::move(attrs));
}

TEST(RoundToTypeTest, RoundsFloatsToNearestEven) {
  EXPECT_EQ(RoundToType(0.1, kF64).f, 0.1);
  EXPECT_EQ(RoundToType(0.1, kF32).f, static_cast<double>(0.1f));
  // f16 has 11 significant bits: 2049 is a tie between 2048 and 2050 and goes to 2048.
  EXPECT_EQ(RoundToType(2049, kF16).f, 2048);
  EXPECT_EQ(RoundToType(2051, kF16).f, 2052);
  EXPECT_TRUE(std::isinf(RoundToType(65520, kF16).f));
  EXPECT_EQ(RoundToType(65519, kF16).f, 65504);
  // bf16 has 8: 257 rounds to 256, 259 to 260.
  EXPECT_EQ(RoundToType(257, kBF16).f, 256);
  EXPECT_EQ(RoundToType(259, kBF16).f, 260);
}

TEST(RoundToTypeTest, RoundsIntegersToNearestEvenAndSaturates) {
  EXPECT_EQ(RoundToType(2.5, kI32).i, 2);
  EXPECT_EQ(RoundToType(3.5, kI32).i, 4);
  EXPECT_EQ(RoundToType(-2.5, kI64).i, -2);
  EXPECT_EQ(RoundToType(1e10, kI32).i, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(RoundToType(-1e10, kI32).i, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(RoundToType(std::nan(""), kI64).i, 0);
  EXPECT_EQ(RoundToType(0.5, kI1).i, 1);
  EXPECT_EQ(RoundToType(0.0, kI1).i, 0);
  EXPECT_EQ(RoundToType(7, Type::Index()).i, 7);
}

TEST(FoldUnaryTest, FloatMathRunsInTheExecutorsPrecision) {
  auto exp = MakeOp(OpKind::kExp);
  // The executors' exp (the same bits on every CPU), in float for f32 and in double for
  // f64: the two differ.
  EXPECT_EQ(FoldUnary(*exp, kF32, F(1))->f, static_cast<double>(deterministic_math::exp(1.0f)));
  EXPECT_EQ(FoldUnary(*exp, kF64, F(1))->f, deterministic_math::exp(1.0));
  EXPECT_NE(FoldUnary(*exp, kF32, F(1))->f, FoldUnary(*exp, kF64, F(1))->f);
  // f16: computed in float, rounded once.
  EXPECT_EQ(FoldUnary(*exp, kF16, F(1))->f, RoundToType(deterministic_math::exp(1.0f), kF16).f);
  auto neg = MakeOp(OpKind::kNeg);
  EXPECT_EQ(FoldUnary(*neg, kBF16, F(2))->f, -2);
  // relu keeps NaN and -0.0 as the kernel does (x < 0 ? 0 : x).
  auto relu = MakeOp(OpKind::kRelu);
  EXPECT_TRUE(std::signbit(FoldUnary(*relu, kF32, F(-0.0))->f));
  EXPECT_TRUE(std::isnan(FoldUnary(*relu, kF32, F(std::nan("")))->f));
  EXPECT_EQ(FoldUnary(*relu, kF32, F(-3))->f, 0);
}

TEST(FoldUnaryTest, GeluHonoursApproximate) {
  auto erf_form = MakeOp(OpKind::kGelu);
  AttrDict tanh_attrs;
  tanh_attrs.Set("approximate", Attribute::Ident("tanh"));
  auto tanh_form = MakeOp(OpKind::kGelu, tanh_attrs);
  double x = 0.75;
  EXPECT_NEAR(FoldUnary(*erf_form, kF64, F(x))->f, 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))),
              1e-15);
  double u = std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  EXPECT_NEAR(FoldUnary(*tanh_form, kF64, F(x))->f, 0.5 * x * (1 + std::tanh(u)), 1e-15);
  EXPECT_NE(FoldUnary(*erf_form, kF64, F(x))->f, FoldUnary(*tanh_form, kF64, F(x))->f);
}

TEST(FoldUnaryTest, IntegerOpsWrapAndFloatOnlyOpsRefuse) {
  auto neg = MakeOp(OpKind::kNeg);
  EXPECT_EQ(FoldUnary(*neg, kI32, I(5))->i, -5);
  // -(-2^31) does not fit i32 and wraps back, as the kernel's int32 store does.
  EXPECT_EQ(FoldUnary(*neg, kI32, I(std::numeric_limits<int32_t>::min()))->i,
            std::numeric_limits<int32_t>::min());
  auto abs = MakeOp(OpKind::kAbs);
  EXPECT_EQ(FoldUnary(*abs, kI64, I(-7))->i, 7);
  auto exp = MakeOp(OpKind::kExp);
  EXPECT_FALSE(FoldUnary(*exp, kI32, I(1)).has_value());
  auto neg_index = MakeOp(OpKind::kNeg);
  EXPECT_FALSE(FoldUnary(*neg_index, Type::Index(), I(1)).has_value());
}

TEST(FoldBinaryTest, FloatArithmetic) {
  EXPECT_EQ(FoldBinary(OpKind::kAdd, kF32, F(0.5), F(0.25))->f, 0.75);
  // 2048 + 1 is not an f16; the tie rounds to even.
  EXPECT_EQ(FoldBinary(OpKind::kAdd, kF16, F(2048), F(1))->f, 2048);
  EXPECT_EQ(FoldBinary(OpKind::kDiv, kF32, F(1), F(3))->f, static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(FoldBinary(OpKind::kPow, kF64, F(2), F(10))->f, 1024);
  EXPECT_TRUE(std::isnan(FoldBinary(OpKind::kMax, kF32, F(std::nan("")), F(1))->f));
  EXPECT_EQ(FoldBinary(OpKind::kMin, kF32, F(-1), F(1))->f, -1);
  EXPECT_TRUE(std::isinf(FoldBinary(OpKind::kDiv, kF32, F(1), F(0))->f));
}

TEST(FoldBinaryTest, IntegerArithmeticWrapsAndRefusesRunTimeErrors) {
  EXPECT_EQ(FoldBinary(OpKind::kAdd, kI32, I(std::numeric_limits<int32_t>::max()), I(1))->i,
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(FoldBinary(OpKind::kDiv, kI32, I(-7), I(2))->i, -4);
  EXPECT_FALSE(FoldBinary(OpKind::kDiv, kI64, I(1), I(0)).has_value());
  EXPECT_EQ(FoldBinary(OpKind::kPow, kI64, I(3), I(4))->i, 81);
  EXPECT_FALSE(FoldBinary(OpKind::kPow, kI64, I(3), I(-1)).has_value());
  EXPECT_EQ(FoldBinary(OpKind::kMul, kI1, I(1), I(1))->i, 1);
  EXPECT_FALSE(FoldBinary(OpKind::kRem, kI64, I(7), I(2)).has_value());
}

TEST(FoldBinaryTest, IndexArithmeticUsesFloorSemantics) {
  Type index = Type::Index();
  EXPECT_EQ(FoldBinary(OpKind::kDiv, index, I(-7), I(2))->i, -4);
  EXPECT_EQ(FoldBinary(OpKind::kRem, index, I(-7), I(3))->i, 2);
  EXPECT_EQ(FoldBinary(OpKind::kRem, index, I(7), I(-3))->i, -2);
  EXPECT_EQ(FoldBinary(OpKind::kDiv, index, I(6), I(3))->i, 2);
  EXPECT_EQ(FoldBinary(OpKind::kMul, index, I(6), I(-3))->i, -18);
  EXPECT_FALSE(FoldBinary(OpKind::kRem, index, I(1), I(0)).has_value());
  EXPECT_FALSE(
      FoldBinary(OpKind::kAdd, index, I(std::numeric_limits<int64_t>::max()), I(1)).has_value());
  EXPECT_FALSE(FoldBinary(OpKind::kMax, index, I(1), I(2)).has_value());
}

TEST(FoldConvertTest, RoundsLikeTheExecutor) {
  EXPECT_EQ(FoldConvert(kF32, kI32, F(2.5)).i, 2);
  EXPECT_EQ(FoldConvert(kF32, kI32, F(-1e20)).i, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(FoldConvert(kI64, kF16, I(2049)).f, 2048);
  EXPECT_EQ(FoldConvert(kI64, kI32, I(int64_t{1} << 32)).i, 0);
  EXPECT_EQ(FoldConvert(kI32, kI1, I(2)).i, 1);
  EXPECT_EQ(FoldConvert(kF64, kF32, F(0.1)).f, static_cast<double>(0.1f));
  EXPECT_EQ(FoldConvert(kF64, kBF16, F(257)).f, 256);
}

TEST(ValueAttributeTest, WritesValuesTheExecutorReadsBackExactly) {
  EXPECT_EQ(ValueAttribute(F(0.5), kF32)->ToString(), "0.5");
  EXPECT_EQ(ValueAttribute(I(-3), kI32)->ToString(), "-3");
  EXPECT_EQ(ValueAttribute(I(int64_t{1} << 53), kI64)->ToString(), "9007199254740992");
  EXPECT_FALSE(ValueAttribute(I((int64_t{1} << 53) + 1), kI64).has_value());
  // Index constants are read as integers, so any int64 is fine.
  EXPECT_EQ(ValueAttribute(I(std::numeric_limits<int64_t>::max()), Type::Index())->ToString(),
            "9223372036854775807");
}

}  // namespace
}  // namespace commir
