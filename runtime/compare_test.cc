#include "runtime/compare.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor Make(ElementType type, std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor::FromDouble(type, std::move(shape), values);
}

Comparison Compare(const Tensor& actual, const Tensor& expected, double tolerance = 1e-5) {
  return CompareWithReference("%r", actual, expected, tolerance);
}

TEST(CompareTest, DefaultTolerances) {
  EXPECT_EQ(DefaultTolerance(ElementType::kF64), 1e-5);
  EXPECT_EQ(DefaultTolerance(ElementType::kF32), 1e-5);
  EXPECT_EQ(DefaultTolerance(ElementType::kF16), 5e-3);
  EXPECT_EQ(DefaultTolerance(ElementType::kBF16), 2e-2);
  EXPECT_EQ(DefaultTolerance(ElementType::kI64), 0);
  EXPECT_EQ(DefaultTolerance(ElementType::kI32), 0);
  EXPECT_EQ(DefaultTolerance(ElementType::kI1), 0);
}

TEST(CompareTest, IdenticalTensorsPass) {
  const Tensor t = Make(ElementType::kF32, {2, 2}, {1, -2, 3.5, 0});
  const Comparison c = CompareWithReference("%c", t, t, 1e-5);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.rel_l2, 0);
  EXPECT_EQ(c.max_abs, 0);
  EXPECT_EQ(FormatComparison(c), "%c  f32[2, 2]  rel_l2=0.00e+00  max_abs=0.00e+00  PASS");
}

TEST(CompareTest, MeasuresRelativeL2AndMaxAbsError) {
  // ||(0, 0.5)|| / ||(3, 4)|| = 0.1.
  const Tensor expected = Make(ElementType::kF64, {2}, {3, 4});
  const Tensor actual = Make(ElementType::kF64, {2}, {3, 4.5});
  const Comparison fail = Compare(actual, expected);
  EXPECT_FALSE(fail.pass);
  EXPECT_DOUBLE_EQ(fail.rel_l2, 0.1);
  EXPECT_EQ(fail.max_abs, 0.5);
  EXPECT_EQ(
      FormatComparison(fail),
      "%r  f64[2]  rel_l2=1.00e-01  max_abs=5.00e-01  FAIL (rel_l2 above tolerance 1.00e-05)");
  const Comparison pass = Compare(actual, expected, 0.1);
  EXPECT_TRUE(pass.pass);
  EXPECT_EQ(FormatComparison(pass), "%r  f64[2]  rel_l2=1.00e-01  max_abs=5.00e-01  PASS");
}

TEST(CompareTest, OneUlpErrorsPassTheHalfPrecisionDefaults) {
  // One ulp off in the last of (1, 2, 3, 4): bf16's ulp at 4 is 2^-5, f16's 2^-8, giving
  // rel_l2 = ulp / sqrt(30) ~ 5.7e-3 and 7.1e-4.
  const Tensor bf16_actual = Make(ElementType::kBF16, {4}, {1, 2, 3, 4 + 0x1p-5});
  const Tensor bf16_expected = Make(ElementType::kBF16, {4}, {1, 2, 3, 4});
  const Comparison bf16 = Compare(bf16_actual, bf16_expected, DefaultTolerance(ElementType::kBF16));
  EXPECT_TRUE(bf16.pass) << FormatComparison(bf16);
  EXPECT_NEAR(bf16.rel_l2, 0x1p-5 / std::sqrt(30.0), 1e-12);
  // The same error is too large for f16's tighter tolerance.
  EXPECT_FALSE(Compare(bf16_actual, bf16_expected, DefaultTolerance(ElementType::kF16)).pass);

  const Comparison f16 =
      Compare(Make(ElementType::kF16, {4}, {1, 2, 3, 4 + 0x1p-8}),
              Make(ElementType::kF16, {4}, {1, 2, 3, 4}), DefaultTolerance(ElementType::kF16));
  EXPECT_TRUE(f16.pass) << FormatComparison(f16);
  EXPECT_EQ(f16.max_abs, 0x1p-8);
}

TEST(CompareTest, ZeroReferenceUsesAbsoluteError) {
  const Tensor zeros(ElementType::kF32, {3});
  const Comparison small = Compare(Make(ElementType::kF32, {3}, {0, 3e-7, -4e-7}), zeros);
  EXPECT_NEAR(small.rel_l2, 5e-7, 1e-12);
  EXPECT_TRUE(small.pass);
  EXPECT_FALSE(Compare(Make(ElementType::kF32, {3}, {0, 0, 1e-3}), zeros).pass);
  EXPECT_TRUE(Compare(zeros, zeros, 0).pass);
}

TEST(CompareTest, HugeValuesDoNotOverflow) {
  const Comparison c = Compare(Make(ElementType::kF64, {2}, {1e300, 1.1e300}),
                               Make(ElementType::kF64, {2}, {1e300, 1e300}), 0.1);
  EXPECT_NEAR(c.rel_l2, 0.1 / std::sqrt(2.0), 1e-12);
  EXPECT_TRUE(c.pass);
}

TEST(CompareTest, EmptyTensorsPass) {
  const Tensor empty(ElementType::kF32, {0, 4});
  const Comparison c = Compare(empty, empty);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(FormatComparison(c), "%r  f32[0, 4]  rel_l2=0.00e+00  max_abs=0.00e+00  PASS");
}

TEST(CompareTest, NonFiniteWhereTheReferenceIsFiniteFails) {
  const Tensor expected = Make(ElementType::kF32, {2, 2}, {1, 2, 3, 4});
  const Comparison nan =
      Compare(Make(ElementType::kF32, {2, 2}, {1, 2, kNaN, kInf}), expected, 1e9);
  EXPECT_FALSE(nan.pass);
  EXPECT_EQ(
      nan.failure_reason,
      "non-finite values disagree at 2 elements, the first at [1, 0]: nan vs 3 in the reference");
  EXPECT_EQ(nan.rel_l2, 0);  // The finite elements agree.
  EXPECT_EQ(
      FormatComparison(nan),
      "%r  f32[2, 2]  rel_l2=0.00e+00  max_abs=0.00e+00  FAIL (non-finite values disagree at 2 "
      "elements, the first at [1, 0]: nan vs 3 in the reference)");

  const Comparison inf = Compare(Make(ElementType::kF32, {2, 2}, {1, -kInf, 3, 4}), expected, 1e9);
  EXPECT_EQ(
      inf.failure_reason,
      "non-finite values disagree at 1 element, the first at [0, 1]: -inf vs 2 in the reference");
}

TEST(CompareTest, NonFiniteValuesMustMatchTheReference) {
  const Tensor expected = Make(ElementType::kF32, {4}, {kInf, -kInf, kNaN, 2});
  const Comparison same =
      Compare(Make(ElementType::kF32, {4}, {kInf, -kInf, kNaN, 2.5}), expected, 0.3);
  EXPECT_TRUE(same.pass) << FormatComparison(same);
  EXPECT_EQ(same.rel_l2, 0.25);  // Over the one finite element only.
  EXPECT_EQ(same.max_abs, 0.5);

  EXPECT_FALSE(Compare(Make(ElementType::kF32, {4}, {-kInf, -kInf, kNaN, 2}), expected).pass);
  EXPECT_FALSE(Compare(Make(ElementType::kF32, {4}, {kInf, -kInf, kInf, 2}), expected).pass);
  const Comparison finite = Compare(Make(ElementType::kF32, {4}, {1e30, -kInf, kNaN, 2}), expected);
  EXPECT_FALSE(finite.pass);
  EXPECT_EQ(
      finite.failure_reason,
      "non-finite values disagree at 1 element, the first at [0]: 1e+30 vs inf in the reference");
}

TEST(CompareTest, TypeOrShapeMismatchFails) {
  const Tensor expected(ElementType::kF32, {4, 1});
  const Comparison shape = Compare(Tensor(ElementType::kF32, {4}), expected);
  EXPECT_FALSE(shape.pass);
  EXPECT_FALSE(shape.comparable);
  EXPECT_EQ(FormatComparison(shape),
            "%r  f32[4]  rel_l2=n/a  max_abs=n/a  FAIL (the reference is f32[4, 1])");
  const Comparison type = Compare(Tensor(ElementType::kBF16, {4, 1}), expected, 1);
  EXPECT_FALSE(type.pass);
  EXPECT_EQ(FormatComparison(type),
            "%r  bf16[4, 1]  rel_l2=n/a  max_abs=n/a  FAIL (the reference is f32[4, 1])");
}

TEST(CompareTest, IntegersMustMatchExactlyByDefault) {
  const Tensor expected = Make(ElementType::kI32, {4}, {1, 2, 3, 4});
  EXPECT_TRUE(Compare(expected, expected, 0).pass);
  const Comparison off = Compare(Make(ElementType::kI32, {4}, {1, 2, 3, 5}), expected, 0);
  EXPECT_FALSE(off.pass);
  EXPECT_EQ(off.failure_reason, "1 of 4 elements differ; integers must match exactly");
  EXPECT_EQ(off.max_abs, 1);
  // An explicit tolerance applies to integers too.
  EXPECT_TRUE(Compare(Make(ElementType::kI32, {4}, {1, 2, 3, 5}), expected, 0.2).pass);

  // 2^60 and 2^60 + 1 are the same double, so only an exact comparison tells them apart.
  const int64_t big = int64_t{1} << 60;
  const Tensor big_expected =
      Tensor::FromInt64(ElementType::kI64, {2}, std::vector<int64_t>{big, 0});
  const Tensor big_actual =
      Tensor::FromInt64(ElementType::kI64, {2}, std::vector<int64_t>{big + 1, 0});
  const Comparison close = Compare(big_actual, big_expected, 0);
  EXPECT_EQ(close.rel_l2, 0);
  EXPECT_FALSE(close.pass);

  const Tensor bools = Make(ElementType::kI1, {3}, {1, 0, 1});
  EXPECT_TRUE(Compare(bools, bools, 0).pass);
  EXPECT_FALSE(Compare(Make(ElementType::kI1, {3}, {1, 1, 1}), bools, 0).pass);
}

TEST(CompareTest, CheckAllFiniteNamesCountAndFirstIndex) {
  EXPECT_TRUE(CheckAllFinite("result %r", Make(ElementType::kF32, {2}, {1, -3e38})).ok());
  EXPECT_TRUE(CheckAllFinite("result %r", Tensor(ElementType::kI64, {5})).ok());
  EXPECT_TRUE(CheckAllFinite("result %r", Tensor(ElementType::kF16, {0})).ok());

  const absl::Status status =
      CheckAllFinite("result %r", Make(ElementType::kF32, {2, 2}, {1, kNaN, kInf, -kInf}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "result %r: 3 non-finite values (1 NaN, 2 infinite), the first at [0, 1] is nan");

  // Overflow when rounding to a narrow type is caught too.
  const absl::Status scalar = CheckAllFinite("%y", Make(ElementType::kF16, {}, {-70000}));
  EXPECT_EQ(scalar.message(),
            "%y: 1 non-finite value (0 NaN, 1 infinite), the first at [] is -inf");
  EXPECT_FALSE(CheckAllFinite("%z", Make(ElementType::kBF16, {3}, {0, 0, kNaN})).ok());
}

TEST(CompareTest, NonFiniteResultsNeedPermissionWithOrWithoutAReference) {
  Tensor nan = Tensor::FromDouble(ElementType::kF32, {2}, {1.0, std::nan("")});
  Tensor finite = Tensor::FromDouble(ElementType::kF32, {2}, {1.0, 2.0});
  EXPECT_FALSE(CheckNonFiniteAllowed("%r", nan, /*allow_nonfinite=*/false).ok());
  EXPECT_TRUE(CheckNonFiniteAllowed("%r", nan, /*allow_nonfinite=*/true).ok());
  EXPECT_TRUE(CheckNonFiniteAllowed("%r", finite, /*allow_nonfinite=*/false).ok());
  // Once allowed, the comparison decides: same positions match, a finite reference fails.
  EXPECT_TRUE(CompareWithReference("%r", nan, nan, 1e-5).pass);
  EXPECT_FALSE(CompareWithReference("%r", nan, finite, 1e-5).pass);
}

}  // namespace
}  // namespace commir::runtime
