#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <vector>

#include "absl/status/statusor.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::ExpectTensorEq;
using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::RoundingTolerance;
using ::commir::cpu::testing::RoundTo;
using ::commir::cpu::testing::Unravel;

constexpr ElementType kFloatTypes[] = {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                                       ElementType::kBF16};

Tensor FromValues(ElementType type, std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor::FromDouble(type, std::move(shape), values);
}

// ---- Unary ------------------------------------------------------------------------------

double ReferenceUnary(ElementwiseFn op, double x) {
  switch (op) {
    case ElementwiseFn::kNeg: return -x;
    case ElementwiseFn::kAbs: return std::fabs(x);
    case ElementwiseFn::kExp: return std::exp(x);
    case ElementwiseFn::kLog: return std::log(x);
    case ElementwiseFn::kSqrt: return std::sqrt(x);
    case ElementwiseFn::kRsqrt: return 1.0 / std::sqrt(x);
    case ElementwiseFn::kTanh: return std::tanh(x);
    case ElementwiseFn::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ElementwiseFn::kRelu: return x > 0 ? x : 0.0;
    case ElementwiseFn::kSilu: return x / (1.0 + std::exp(-x));
    // 1 + erf(z) written as erfc(-z) so the reference itself does not cancel for x < 0.
    case ElementwiseFn::kGeluErf: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ElementwiseFn::kGeluTanh: {
      // 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)), again to avoid cancellation for x < 0.
      const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * u));
    }
    default: break;  // two-operand functions: ReferenceBinary
  }
  return 0;
}

constexpr ElementwiseFn kAllUnaryOps[] = {
    ElementwiseFn::kNeg,  ElementwiseFn::kAbs,     ElementwiseFn::kExp,
    ElementwiseFn::kLog,  ElementwiseFn::kSqrt,    ElementwiseFn::kRsqrt,
    ElementwiseFn::kTanh, ElementwiseFn::kSigmoid, ElementwiseFn::kRelu,
    ElementwiseFn::kSilu, ElementwiseFn::kGeluErf, ElementwiseFn::kGeluTanh};

bool NeedsPositiveInput(ElementwiseFn op) {
  return op == ElementwiseFn::kLog || op == ElementwiseFn::kSqrt || op == ElementwiseFn::kRsqrt;
}

TEST(UnaryTest, EveryOpMatchesF64ReferenceForEveryFloatType) {
  for (ElementType type : kFloatTypes) {
    for (ElementwiseFn op : kAllUnaryOps) {
      const double low = NeedsPositiveInput(op) ? 0.01 : -6.0;
      const Tensor x = RandomTensor(type, {3, 17}, 7, low, 6.0);
      std::vector<double> expected;
      for (double value : x.ToDouble()) {
        expected.push_back(RoundTo(type, ReferenceUnary(op, value)));
      }
      COMMIR_ASSERT_OK_AND_ASSIGN(const Tensor result, Unary(op, x));
      // f32: libm is within a few ulp, but rounding x itself (or x / sqrt 2) to f32 moves
      // exp(x) and erfc(-x / sqrt 2) by up to |x| resp. x^2 times that relative error, which
      // for |x| <= 6 stays below 1e-5. 16-bit results may land one ulp off the correctly
      // rounded value when the f32 result sits next to a rounding boundary.
      const double rtol = type == ElementType::kF32 ? 1e-5 : RoundingTolerance(type);
      ExpectTensorNear(result, type, {3, 17}, expected, rtol, 1e-30);
      if (::testing::Test::HasFailure()) {
        FAIL() << ElementwiseFnName(op) << " on " << ElementTypeName(type);
      }
    }
  }
}

TEST(UnaryTest, ScalarAndEmptyTensors) {
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor scalar,
                              Unary(ElementwiseFn::kExp, FromValues(ElementType::kF32, {}, {1.0})));
  ExpectTensorNear(scalar, ElementType::kF32, {}, {std::exp(1.0)}, 1e-7);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor empty,
                              Unary(ElementwiseFn::kTanh, Tensor(ElementType::kBF16, {0, 3})));
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 3}));
}

TEST(UnaryTest, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = FromValues(ElementType::kF32, {5}, {-1000.0, 1000.0, -inf, inf, nan});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sigmoid, Unary(ElementwiseFn::kSigmoid, x));
  ExpectTensorEq(sigmoid, ElementType::kF32, {5}, {0.0, 1.0, 0.0, 1.0, nan});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor silu, Unary(ElementwiseFn::kSilu, x));
  ExpectTensorEq(silu, ElementType::kF32, {5}, {-0.0, 1000.0, nan, inf, nan});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor relu, Unary(ElementwiseFn::kRelu, x));
  ExpectTensorEq(relu, ElementType::kF32, {5}, {0.0, 1000.0, 0.0, inf, nan});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor gelu, Unary(ElementwiseFn::kGeluErf, x));
  ExpectTensorEq(gelu, ElementType::kF32, {5}, {-0.0, 1000.0, nan, inf, nan});

  const Tensor negative = FromValues(ElementType::kF64, {3}, {-1.0, 0.0, -0.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor log, Unary(ElementwiseFn::kLog, negative));
  ExpectTensorEq(log, ElementType::kF64, {3}, {nan, -inf, -inf});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor rsqrt, Unary(ElementwiseFn::kRsqrt, negative));
  ExpectTensorEq(rsqrt, ElementType::kF64, {3}, {nan, inf, -inf});
  // exp overflows f16 long before f32: rounding happens after computing in f32.
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor exp16, Unary(ElementwiseFn::kExp, FromValues(ElementType::kF16, {2}, {12.0, -20.0})));
  ExpectTensorEq(exp16, ElementType::kF16, {2}, {inf, RoundTo(ElementType::kF16, std::exp(-20.0))});
}

TEST(UnaryTest, IntegerOpsWrapAndOthersAreErrors) {
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  const Tensor x = FromValues(ElementType::kI32, {4}, {-5, 0, 7, min32});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor neg, Unary(ElementwiseFn::kNeg, x));
  ExpectTensorEq(neg, ElementType::kI32, {4}, {5, 0, -7, min32});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor abs, Unary(ElementwiseFn::kAbs, x));
  ExpectTensorEq(abs, ElementType::kI32, {4}, {5, 0, 7, min32});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor relu, Unary(ElementwiseFn::kRelu, x));
  ExpectTensorEq(relu, ElementType::kI32, {4}, {0, 0, 7, 0});
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor neg64,
      Unary(ElementwiseFn::kNeg,
            Tensor::FromInt64(ElementType::kI64, {1},
                              std::vector<int64_t>{std::numeric_limits<int64_t>::min()})));
  EXPECT_EQ(neg64.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  ExpectInvalidArgument(Unary(ElementwiseFn::kExp, x).status(),
                        {"exp", "floating-point", "i32[4]"});
  ExpectInvalidArgument(Unary(ElementwiseFn::kGeluTanh, Tensor(ElementType::kI1, {2})).status(),
                        {"gelu"});
}

TEST(ElementwiseTest, AFunctionOfTheOtherArityIsAnError) {
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {2}, {1.0, 2.0});
  ExpectInvalidArgument(Unary(ElementwiseFn::kAdd, x).status(), {"'add' takes 2 operand(s)"});
  ExpectInvalidArgument(Binary(ElementwiseFn::kExp, x, x).status(),
                        {"'exp' takes 1 operand(s)"});
}

// ---- Binary -----------------------------------------------------------------------------

double ReferenceBinary(ElementwiseFn op, double a, double b) {
  switch (op) {
    case ElementwiseFn::kAdd: return a + b;
    case ElementwiseFn::kSub: return a - b;
    case ElementwiseFn::kMul: return a * b;
    case ElementwiseFn::kDiv: return a / b;
    case ElementwiseFn::kMax: return std::max(a, b);
    case ElementwiseFn::kMin: return std::min(a, b);
    case ElementwiseFn::kPow: return std::pow(a, b);
    default: break;  // one-operand functions: ReferenceUnary
  }
  return 0;
}

constexpr ElementwiseFn kAllBinaryOps[] = {ElementwiseFn::kAdd, ElementwiseFn::kSub,
                                           ElementwiseFn::kMul, ElementwiseFn::kDiv,
                                           ElementwiseFn::kMax, ElementwiseFn::kMin,
                                           ElementwiseFn::kPow};

// Reference NumPy-broadcast binary op in f64: each output index reads each operand at the
// same trailing-aligned index, with extent-1 dimensions pinned to 0.
std::vector<double> ReferenceBroadcastBinary(ElementwiseFn op, const Tensor& a, const Tensor& b,
                                             const std::vector<int64_t>& out_shape) {
  auto source_index = [&](const Tensor& x, const std::vector<int64_t>& out_index) {
    int64_t flat = 0;
    const size_t leading = out_shape.size() - x.shape().size();
    for (size_t d = 0; d < x.shape().size(); ++d) {
      flat = flat * x.dim(d) + (x.dim(d) == 1 ? 0 : out_index[leading + d]);
    }
    return flat;
  };
  std::vector<double> expected;
  for (int64_t i = 0; i < runtime::NumElements(out_shape); ++i) {
    const std::vector<int64_t> index = Unravel(i, out_shape);
    expected.push_back(ReferenceBinary(op, a.GetAsDouble(source_index(a, index)),
                                       b.GetAsDouble(source_index(b, index))));
  }
  return expected;
}

struct BroadcastCase {
  std::vector<int64_t> a, b, result;
};

TEST(BinaryTest, EveryOpBroadcastsLikeNumPy) {
  const std::vector<BroadcastCase> cases = {{{2, 3}, {2, 3}, {2, 3}},
                                            {{2, 3}, {3}, {2, 3}},
                                            {{2, 1, 4}, {3, 1}, {2, 3, 4}},
                                            {{}, {2, 2}, {2, 2}},
                                            {{2, 2}, {}, {2, 2}},
                                            {{}, {}, {}},
                                            {{1}, {}, {1}},
                                            {{4, 1, 1}, {1, 5}, {4, 1, 5}},
                                            {{0, 3}, {3}, {0, 3}},
                                            {{1, 3, 1}, {2, 1, 1, 4}, {2, 1, 3, 4}}};
  for (ElementType type : {ElementType::kF64, ElementType::kF32}) {
    for (ElementwiseFn op : kAllBinaryOps) {
      uint32_t seed = 1;
      for (const BroadcastCase& c : cases) {
        // pow needs a positive base to stay real.
        const double low = op == ElementwiseFn::kPow ? 0.1 : -2.0;
        const Tensor a = RandomTensor(type, c.a, seed++, low, 2.0);
        const Tensor b = RandomTensor(type, c.b, seed++, -2.0, 2.0);
        std::vector<double> expected = ReferenceBroadcastBinary(op, a, b, c.result);
        for (double& value : expected) value = RoundTo(type, value);
        COMMIR_ASSERT_OK_AND_ASSIGN(const Tensor result, Binary(op, a, b));
        // One correctly rounded operation, except pow through libm (a few ulp).
        const double rtol = op == ElementwiseFn::kPow ? 1e-6 : 0.0;
        ExpectTensorNear(result, type, c.result, expected,
                         type == ElementType::kF64 ? 1e-15 : rtol);
        if (::testing::Test::HasFailure())
          FAIL() << ElementwiseFnName(op) << " " << ElementTypeName(type);
      }
    }
  }
}

TEST(BinaryTest, SixteenBitTypesRoundOnceToNearestEven) {
  // bf16 has 8 significant bits: 1 + 2^-8 is the tie between 1 and 1 + 2^-7 (goes to 1),
  // 1 + 3 * 2^-8 the tie between 1 + 2^-7 and 1 + 2^-6 (goes to 1 + 2^-6).
  const Tensor one = FromValues(ElementType::kBF16, {2}, {1.0, 1.0});
  const Tensor small =
      FromValues(ElementType::kBF16, {2}, {std::ldexp(1.0, -8), 3 * std::ldexp(1.0, -8)});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, Binary(ElementwiseFn::kAdd, one, small));
  ExpectTensorEq(sum, ElementType::kBF16, {2}, {1.0, 1.0 + std::ldexp(1.0, -6)});
  // f16 overflow to infinity and subnormal results.
  const Tensor big = FromValues(ElementType::kF16, {2}, {60000.0, std::ldexp(1.0, -14)});
  const Tensor factor = FromValues(ElementType::kF16, {2}, {2.0, 0.25});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor product, Binary(ElementwiseFn::kMul, big, factor));
  ExpectTensorEq(product, ElementType::kF16, {2},
                 {std::numeric_limits<double>::infinity(), std::ldexp(1.0, -16)});
  // Random bf16/f16 operands against the f64 result rounded once.
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    const Tensor a = RandomTensor(type, {64}, 3);
    const Tensor b = RandomTensor(type, {64}, 4);
    for (ElementwiseFn op : {ElementwiseFn::kAdd, ElementwiseFn::kSub, ElementwiseFn::kMul, ElementwiseFn::kDiv}) {
      std::vector<double> expected = ReferenceBroadcastBinary(op, a, b, {64});
      for (double& value : expected) value = RoundTo(type, value);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Binary(op, a, b));
      // add/sub/mul of 16-bit values are exact in f32, so rounding once is exact; the f32
      // quotient is itself rounded, which can differ only at an exact 16-bit tie.
      ExpectTensorNear(result, type, {64}, expected,
                       op == ElementwiseFn::kDiv ? RoundingTolerance(type) : 0.0);
    }
  }
}

TEST(BinaryTest, FloatEdgeCasesFollowIeee) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = FromValues(ElementType::kF32, {4}, {1.0, -1.0, 0.0, nan});
  const Tensor zero = FromValues(ElementType::kF32, {}, {0.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor quotient, Binary(ElementwiseFn::kDiv, a, zero));
  ExpectTensorEq(quotient, ElementType::kF32, {4}, {inf, -inf, nan, nan});
  const Tensor b = FromValues(ElementType::kF32, {4}, {nan, 2.0, -1.0, 3.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, Binary(ElementwiseFn::kMax, a, b));
  ExpectTensorEq(maximum, ElementType::kF32, {4}, {nan, 2.0, 0.0, nan});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor minimum, Binary(ElementwiseFn::kMin, a, b));
  ExpectTensorEq(minimum, ElementType::kF32, {4}, {nan, -1.0, -1.0, nan});
}

TEST(BinaryTest, IntegerArithmeticFloorsDivisionAndWraps) {
  const Tensor a = FromValues(ElementType::kI32, {6}, {7, -7, 7, -7, 0, 6});
  const Tensor b = FromValues(ElementType::kI32, {6}, {2, 2, -2, -2, -3, 3});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor quotient, Binary(ElementwiseFn::kDiv, a, b));
  ExpectTensorEq(quotient, ElementType::kI32, {6}, {3, -4, -4, 3, 0, 2});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor power,
                              Binary(ElementwiseFn::kPow, a, FromValues(ElementType::kI32, {}, {3})));
  ExpectTensorEq(power, ElementType::kI32, {6}, {343, -343, 343, -343, 0, 216});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor zeroth,
                              Binary(ElementwiseFn::kPow, a, FromValues(ElementType::kI32, {}, {0})));
  ExpectTensorEq(zeroth, ElementType::kI32, {6}, {1, 1, 1, 1, 1, 1});

  const int32_t max32 = std::numeric_limits<int32_t>::max();
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor wrapped, Binary(ElementwiseFn::kAdd, FromValues(ElementType::kI32, {2}, {max32, min32}),
                             FromValues(ElementType::kI32, {2}, {1, -1})));
  ExpectTensorEq(wrapped, ElementType::kI32, {2}, {min32, max32});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor min_over_minus_one,
                              Binary(ElementwiseFn::kDiv, FromValues(ElementType::kI32, {1}, {min32}),
                                     FromValues(ElementType::kI32, {1}, {-1})));
  ExpectTensorEq(min_over_minus_one, ElementType::kI32, {1}, {min32});
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor min64_quotient,
      Binary(ElementwiseFn::kDiv, Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{min64}),
             Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{-1})));
  EXPECT_EQ(min64_quotient.data<int64_t>()[0], min64);
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor big_product,
      Binary(ElementwiseFn::kMul,
             Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{int64_t{1} << 62}),
             Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{4})));
  EXPECT_EQ(big_product.data<int64_t>()[0], 0);

  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, Binary(ElementwiseFn::kMax, a, b));
  ExpectTensorEq(maximum, ElementType::kI32, {6}, {7, 2, 7, -2, 0, 6});
  // Large i64 values stay exact (they would not survive a trip through double).
  const int64_t big = (int64_t{1} << 60) + 1;
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor exact,
      Binary(ElementwiseFn::kSub, Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{big}),
             Tensor::FromInt64(ElementType::kI64, {1}, std::vector<int64_t>{1})));
  EXPECT_EQ(exact.data<int64_t>()[0], int64_t{1} << 60);
}

TEST(BinaryTest, BoolArithmeticStoresZeroOrOne) {
  const Tensor a = FromValues(ElementType::kI1, {4}, {0, 0, 1, 1});
  const Tensor b = FromValues(ElementType::kI1, {4}, {0, 1, 0, 1});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, Binary(ElementwiseFn::kAdd, a, b));
  ExpectTensorEq(sum, ElementType::kI1, {4}, {0, 1, 1, 1});  // or
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor product, Binary(ElementwiseFn::kMul, a, b));
  ExpectTensorEq(product, ElementType::kI1, {4}, {0, 0, 0, 1});  // and
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor difference, Binary(ElementwiseFn::kSub, a, b));
  ExpectTensorEq(difference, ElementType::kI1, {4}, {0, 1, 1, 0});  // xor
}

TEST(BinaryTest, ErrorsAreReported) {
  const Tensor i32 = FromValues(ElementType::kI32, {3}, {1, 2, 3});
  ExpectInvalidArgument(
      Binary(ElementwiseFn::kDiv, i32, FromValues(ElementType::kI32, {3}, {1, 0, 1})).status(),
      {"division by zero"});
  ExpectInvalidArgument(
      Binary(ElementwiseFn::kPow, i32, FromValues(ElementType::kI32, {}, {-1})).status(), {"negative"});
  ExpectInvalidArgument(
      Binary(ElementwiseFn::kAdd, Tensor(ElementType::kF32, {2, 3}), Tensor(ElementType::kF32, {4}))
          .status(),
      {"add", "[2, 3]", "[4]", "broadcast"});
  ExpectInvalidArgument(
      Binary(ElementwiseFn::kMul, Tensor(ElementType::kF32, {2}), Tensor(ElementType::kF16, {2}))
          .status(),
      {"mul", "f32[2]", "f16[2]"});
}

// ---- Convert and Full -------------------------------------------------------------------

// ---- Compare and select -----------------------------------------------------------------

TEST(CompareTest, EachPredicateBroadcastsAndGivesI1) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // [2, 3] against [3]: rows compared with one shared row, NaN unequal to everything.
  const Tensor a = FromValues(ElementType::kF32, {2, 3}, {1.0, 2.0, nan, -0.0, 5.0, 3.0});
  const Tensor b = FromValues(ElementType::kF32, {3}, {1.0, 3.0, 3.0});
  const std::vector<std::pair<ElementwiseFn, std::vector<double>>> cases = {
      {ElementwiseFn::kEq, {1, 0, 0, 0, 0, 1}}, {ElementwiseFn::kNe, {0, 1, 1, 1, 1, 0}},
      {ElementwiseFn::kLt, {0, 1, 0, 1, 0, 0}}, {ElementwiseFn::kLe, {1, 1, 0, 1, 0, 1}},
      {ElementwiseFn::kGt, {0, 0, 0, 0, 1, 0}}, {ElementwiseFn::kGe, {1, 0, 0, 0, 1, 1}},
  };
  for (const auto& [fn, expected] : cases) {
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Binary(fn, a, b));
    ExpectTensorEq(result, ElementType::kI1, {2, 3}, expected);
  }
}

TEST(CompareTest, ComparesExactlyInEveryElementType) {
  // Neighbouring values that a comparison through a narrower type would confuse.
  const int64_t big = (int64_t{1} << 53) + 1;
  const Tensor i = Tensor::FromInt64(ElementType::kI64, {2}, {big, -3});
  const Tensor j = Tensor::FromInt64(ElementType::kI64, {2}, {big - 1, -3});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor gt, Binary(ElementwiseFn::kGt, i, j));
  ExpectTensorEq(gt, ElementType::kI1, {2}, {1, 0});
  for (ElementType type : {ElementType::kF16, ElementType::kBF16, ElementType::kF64}) {
    const Tensor x = FromValues(type, {2}, {0.5, -2.0});
    const Tensor y = FromValues(type, {}, {0.5});
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor le, Binary(ElementwiseFn::kLe, x, y));
    ExpectTensorEq(le, ElementType::kI1, {2}, {1, 1});
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor eq, Binary(ElementwiseFn::kEq, x, y));
    ExpectTensorEq(eq, ElementType::kI1, {2}, {1, 0});
  }
}

TEST(SelectTest, ChoosesPerElementWithBroadcasting) {
  // A [2, 1] condition, a [2, 3] first choice and a scalar second choice.
  const Tensor cond = Tensor::FromInt64(ElementType::kI1, {2, 1}, {1, 0});
  const Tensor a = FromValues(ElementType::kBF16, {2, 3}, {1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  const Tensor b = FromValues(ElementType::kBF16, {}, {-1.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Ternary(ElementwiseFn::kSelect, cond, a, b));
  ExpectTensorEq(result, ElementType::kBF16, {2, 3}, {1.5, 2.5, 3.5, -1.0, -1.0, -1.0});
  const Tensor ints = Tensor::FromInt64(ElementType::kI32, {3}, {7, 8, 9});
  const Tensor other = Tensor::FromInt64(ElementType::kI32, {3}, {-7, -8, -9});
  const Tensor mask = Tensor::FromInt64(ElementType::kI1, {3}, {0, 1, 0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor picked, Ternary(ElementwiseFn::kSelect, mask, ints, other));
  ExpectTensorEq(picked, ElementType::kI32, {3}, {-7, 8, -9});
}

TEST(SelectTest, ErrorsAreReported) {
  const Tensor x = FromValues(ElementType::kF32, {4}, {1, 2, 3, 4});
  ExpectInvalidArgument(Ternary(ElementwiseFn::kSelect, x, x, x).status(),
                        {"select", "condition", "i1"});
  const Tensor cond = Tensor::FromInt64(ElementType::kI1, {3}, {1, 0, 1});
  ExpectInvalidArgument(Ternary(ElementwiseFn::kSelect, cond, x, x).status(), {"select"});
  const Tensor half = FromValues(ElementType::kF16, {4}, {1, 2, 3, 4});
  const Tensor mask = Tensor::FromInt64(ElementType::kI1, {4}, {1, 0, 1, 0});
  ExpectInvalidArgument(Ternary(ElementwiseFn::kSelect, mask, x, half).status(), {"select"});
  ExpectInvalidArgument(Ternary(ElementwiseFn::kAdd, mask, x, x).status(),
                        {"'add' takes 2 operand(s)"});
}

TEST(ConvertTest, RoundsToNearestEvenAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = FromValues(ElementType::kF32, {8}, {0.5, 1.5, 2.5, -2.5, 3e9, -3e9, nan, -0.7});
  ExpectTensorEq(Convert(x, ElementType::kI32), ElementType::kI32, {8},
                 {0, 2, 2, -2, 2147483647, -2147483648.0, 0, -1});
  ExpectTensorEq(Convert(x, ElementType::kI1), ElementType::kI1, {8}, {1, 1, 1, 1, 1, 1, 1, 1});
  ExpectTensorEq(
      Convert(x, ElementType::kF16), ElementType::kF16, {8},
      {0.5, 1.5, 2.5, -2.5, inf, -inf, nan, RoundTo(ElementType::kF16, static_cast<float>(-0.7))});
  // f32 -> f16 ties: 1 + 2^-11 goes to 1, 1 + 3 * 2^-11 to 1 + 2^-9.
  const Tensor ties =
      FromValues(ElementType::kF32, {2}, {1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11)});
  ExpectTensorEq(Convert(ties, ElementType::kF16), ElementType::kF16, {2},
                 {1.0, 1 + std::ldexp(1.0, -9)});
  // f64 -> f32 overflow and a double whose f16 rounding must not go through f32.
  const Tensor wide =
      FromValues(ElementType::kF64, {2}, {1e300, 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  ExpectTensorEq(Convert(wide, ElementType::kF32), ElementType::kF32, {2},
                 {inf, 1 + std::ldexp(1.0, -11)});
  ExpectTensorEq(Convert(wide, ElementType::kF16), ElementType::kF16, {2},
                 {inf, 1 + std::ldexp(1.0, -10)});
}

TEST(ConvertTest, IntegerConversions) {
  const std::vector<int64_t> values = {(int64_t{1} << 32) + 5, -1, 0, 3};
  const Tensor i64 = Tensor::FromInt64(ElementType::kI64, {4}, values);
  ExpectTensorEq(Convert(i64, ElementType::kI32), ElementType::kI32, {4}, {5, -1, 0, 3});
  ExpectTensorEq(Convert(i64, ElementType::kI1), ElementType::kI1, {4}, {1, 1, 0, 1});
  ExpectTensorEq(Convert(i64, ElementType::kF32), ElementType::kF32, {4},
                 {std::ldexp(1.0, 32), -1, 0, 3});
  const Tensor i1 = FromValues(ElementType::kI1, {2}, {1, 0});
  ExpectTensorEq(Convert(i1, ElementType::kBF16), ElementType::kBF16, {2}, {1, 0});
  ExpectTensorEq(Convert(i1, ElementType::kI64), ElementType::kI64, {2}, {1, 0});
}

TEST(ConvertTest, BetweenAllTypesAndIdentity) {
  for (ElementType from : kAllElementTypes) {
    const Tensor x = FromValues(from, {2, 2}, {0, 1, 0, 1});
    for (ElementType to : kAllElementTypes) {
      ExpectTensorEq(Convert(x, to), to, {2, 2}, {0, 1, 0, 1});
    }
    EXPECT_TRUE(Convert(x, from).BitwiseEqual(x));
  }
  const Tensor bf16 =
      FromValues(ElementType::kBF16, {1}, {std::ldexp(1.0, 20) + std::ldexp(1.0, 13)});
  ExpectTensorEq(Convert(bf16, ElementType::kF16), ElementType::kF16, {1},
                 {std::numeric_limits<double>::infinity()});
  EXPECT_EQ(Convert(Tensor(ElementType::kF32, {}), ElementType::kF64).rank(), 0);
}

TEST(FullTest, FillsEveryElementRoundedToType) {
  const Tensor f16 = Full(ElementType::kF16, {2, 3}, 0.1);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(f16.data<uint16_t>()[i], 0x2e66);
  ExpectTensorEq(Full(ElementType::kI32, {3}, -2.5), ElementType::kI32, {3}, {-2, -2, -2});
  ExpectTensorEq(Full(ElementType::kI1, {2}, 7.0), ElementType::kI1, {2}, {1, 1});
  ExpectTensorEq(Full(ElementType::kF64, {}, 0.1), ElementType::kF64, {}, {0.1});
  ExpectTensorEq(Full(ElementType::kBF16, {3, 0}, 1.0), ElementType::kBF16, {3, 0}, {});
  const double inf = std::numeric_limits<double>::infinity();
  ExpectTensorEq(Full(ElementType::kF32, {2}, -inf), ElementType::kF32, {2}, {-inf, -inf});
}

}  // namespace
}  // namespace commir::cpu
