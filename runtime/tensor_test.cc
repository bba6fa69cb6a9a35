#include "runtime/tensor.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "commir/element_type.h"
#include "commir/float16.h"
#include "gtest/gtest.h"

namespace commir::runtime {
namespace {

TEST(TensorTest, ConstructorZeroFillsAndSizesStorage) {
  for (ElementType type : kAllElementTypes) {
    Tensor tensor(type, {2, 3});
    EXPECT_EQ(tensor.element_type(), type);
    EXPECT_EQ(tensor.rank(), 2);
    EXPECT_EQ(tensor.dim(1), 3);
    EXPECT_EQ(tensor.num_elements(), 6);
    EXPECT_EQ(tensor.byte_size(), 6 * ElementTypeByteWidth(type));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(tensor.GetAsDouble(i), 0.0);
  }
}

TEST(TensorTest, ScalarAndEmptyShapes) {
  Tensor scalar(ElementType::kF32, {});
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(scalar.DebugTypeString(), "f32[]");
  Tensor empty(ElementType::kBF16, {4, 0, 2});
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_EQ(empty.byte_size(), 0);
  EXPECT_TRUE(empty.ToFloat().empty());
  Tensor default_constructed;
  EXPECT_EQ(default_constructed.num_elements(), 0);
}

TEST(TensorTest, DebugTypeString) {
  EXPECT_EQ(Tensor(ElementType::kF32, {2, 3}).DebugTypeString(), "f32[2, 3]");
  EXPECT_EQ(Tensor(ElementType::kI1, {7}).DebugTypeString(), "i1[7]");
  EXPECT_EQ(Tensor(ElementType::kBF16, {1, 1, 1}).DebugTypeString(), "bf16[1, 1, 1]");
}

TEST(TensorTest, StridesAndElementCounts) {
  EXPECT_EQ(RowMajorStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(RowMajorStrides({}), std::vector<int64_t>{});
  EXPECT_EQ(RowMajorStrides({5, 0, 2}), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({3, 0}), 0);
}

TEST(TensorTest, SetFromDoubleRoundsToEachStorageType) {
  const double value = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  Tensor f64(ElementType::kF64, {1});
  f64.SetFromDouble(0, value);
  EXPECT_EQ(f64.GetAsDouble(0), value);
  Tensor f32(ElementType::kF32, {1});
  f32.SetFromDouble(0, value);
  EXPECT_EQ(f32.GetAsDouble(0), static_cast<double>(static_cast<float>(value)));
  Tensor f16(ElementType::kF16, {1});
  f16.SetFromDouble(0, value);
  EXPECT_EQ(f16.data<uint16_t>()[0], 0x3c01);  // rounded once, from the double
  Tensor bf16(ElementType::kBF16, {1});
  bf16.SetFromDouble(0, 3.14159);
  EXPECT_EQ(bf16.data<uint16_t>()[0], 0x4049);
  EXPECT_EQ(bf16.GetAsDouble(0), 3.140625);
}

TEST(TensorTest, SetFromDoubleRoundsIntegersToNearestEvenAndSaturates) {
  Tensor i32(ElementType::kI32, {12});
  const std::vector<double> inputs = {0.5,    1.5,  2.5,  -0.5,  -1.5,         -2.5,
                                      2.4999, -2.6, 1e12, -1e12, std::nan(""), 2147483647.4};
  const std::vector<int32_t> expected = {
      0, 2, 2, 0, -2, -2, 2, -3, 2147483647, -2147483647 - 1, 0, 2147483647};
  for (int i = 0; i < 12; ++i) i32.SetFromDouble(i, inputs[i]);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(i32.data<int32_t>()[i], expected[i]) << inputs[i];

  Tensor i64(ElementType::kI64, {4});
  i64.SetFromDouble(0, 1e30);
  i64.SetFromDouble(1, -1e30);
  i64.SetFromDouble(2, 9007199254740993.0);  // not representable: the double is 2^53
  i64.SetFromDouble(3, -9223372036854775808.0);
  EXPECT_EQ(i64.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64.data<int64_t>()[2], int64_t{1} << 53);
  EXPECT_EQ(i64.data<int64_t>()[3], std::numeric_limits<int64_t>::min());
}

TEST(TensorTest, BoolStoresZeroOrOne) {
  Tensor i1(ElementType::kI1, {4});
  i1.SetFromDouble(0, 0.0);
  i1.SetFromDouble(1, -3.5);
  i1.SetFromDouble(2, 0.25);
  i1.SetFromDouble(3, -0.0);
  EXPECT_EQ(i1.data<uint8_t>()[0], 0);
  EXPECT_EQ(i1.data<uint8_t>()[1], 1);
  EXPECT_EQ(i1.data<uint8_t>()[2], 1);
  EXPECT_EQ(i1.data<uint8_t>()[3], 0);
  const std::vector<int64_t> ints = {0, 5, -1, 0};
  Tensor from_ints = Tensor::FromInt64(ElementType::kI1, {4}, ints);
  EXPECT_EQ(from_ints.ToInt64(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(TensorTest, FloatAndDoubleRoundTripsForEveryType) {
  const std::vector<double> values = {0.0, 1.0, -2.0, 0.5, 100.0, -0.25};
  for (ElementType type : kAllElementTypes) {
    if (type == ElementType::kI1) continue;
    Tensor from_double = Tensor::FromDouble(type, {2, 3}, values);
    std::vector<float> as_float(values.begin(), values.end());
    Tensor from_float = Tensor::FromFloat(type, {2, 3}, as_float);
    EXPECT_TRUE(from_double.BitwiseEqual(from_float)) << ElementTypeName(type);
    const bool is_int = IsIntegerType(type);
    for (int i = 0; i < 6; ++i) {
      const double expected = is_int ? std::nearbyint(values[i]) : values[i];
      EXPECT_EQ(from_double.ToDouble()[i], expected) << ElementTypeName(type);
      EXPECT_EQ(from_double.ToFloat()[i], static_cast<float>(expected));
    }
  }
}

TEST(TensorTest, FromFloatRoundsToNearestEven) {
  const std::vector<float> values = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
                                     65520.0f, -1e-10f};
  Tensor f16 = Tensor::FromFloat(ElementType::kF16, {4}, values);
  EXPECT_EQ(f16.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(f16.data<uint16_t>()[1], 0x3c02);
  EXPECT_EQ(f16.data<uint16_t>()[2], 0x7c00);
  EXPECT_EQ(f16.data<uint16_t>()[3], 0x8000);
  Tensor bf16 = Tensor::FromFloat(ElementType::kBF16, {4}, values);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bf16.data<uint16_t>()[i], FloatToBFloat16Bits(values[i]));
  }
}

TEST(TensorTest, Int64ConversionsAreExactAndWrapForI32) {
  const std::vector<int64_t> values = {std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(), (int64_t{1} << 32) + 7,
                                       -1};
  Tensor i64 = Tensor::FromInt64(ElementType::kI64, {4}, values);
  EXPECT_EQ(i64.ToInt64(), values);
  Tensor i32 = Tensor::FromInt64(ElementType::kI32, {4}, values);
  EXPECT_EQ(i32.ToInt64(), (std::vector<int64_t>{-1, 0, 7, -1}));
}

TEST(TensorTest, Int64ToFloatTypesRoundsOnce) {
  // 2^62 + 2^54 is the bf16 tie between 2^62 and 2^62 + 2^55. One more is just above
  // it, but converting to double first would drop the 1 and round down to the even 2^62.
  const int64_t above_tie = (int64_t{1} << 62) + (int64_t{1} << 54) + 1;
  const int64_t tie = (int64_t{1} << 62) + (int64_t{1} << 54);
  const std::vector<int64_t> values = {above_tie, tie, -above_tie, 70000, 3};
  Tensor bf16 = Tensor::FromInt64(ElementType::kBF16, {5}, values);
  EXPECT_EQ(bf16.GetAsDouble(0), std::ldexp(1.0, 62) + std::ldexp(1.0, 55));
  EXPECT_EQ(bf16.GetAsDouble(1), std::ldexp(1.0, 62));
  EXPECT_EQ(bf16.GetAsDouble(2), -(std::ldexp(1.0, 62) + std::ldexp(1.0, 55)));
  EXPECT_EQ(bf16.GetAsDouble(4), 3.0);
  Tensor f16 = Tensor::FromInt64(ElementType::kF16, {5}, values);
  EXPECT_EQ(f16.GetAsDouble(0), INFINITY);
  EXPECT_EQ(f16.GetAsDouble(2), -INFINITY);
  EXPECT_EQ(f16.GetAsDouble(3), INFINITY);
  EXPECT_EQ(f16.GetAsDouble(4), 3.0);
  Tensor f32 = Tensor::FromInt64(ElementType::kF32, {5}, values);
  EXPECT_EQ(f32.data<float>()[0], std::ldexp(1.0f, 62) + std::ldexp(1.0f, 54));
}

TEST(TensorTest, ToInt64RoundsFloats) {
  Tensor f32 =
      Tensor::FromFloat(ElementType::kF32, {4}, std::vector<float>{2.5f, -3.5f, 1e20f, NAN});
  EXPECT_EQ(f32.ToInt64(), (std::vector<int64_t>{2, -4, std::numeric_limits<int64_t>::max(), 0}));
}

TEST(TensorTest, BitwiseEqualComparesTypeShapeAndBytes) {
  const std::vector<double> values = {1, 2, 3, 4};
  Tensor a = Tensor::FromDouble(ElementType::kF32, {2, 2}, values);
  EXPECT_TRUE(a.BitwiseEqual(Tensor::FromDouble(ElementType::kF32, {2, 2}, values)));
  EXPECT_FALSE(a.BitwiseEqual(Tensor::FromDouble(ElementType::kF32, {4}, values)));
  EXPECT_FALSE(a.BitwiseEqual(Tensor::FromDouble(ElementType::kI32, {2, 2}, values)));
  Tensor b = a;
  b.SetFromDouble(3, 5.0);
  EXPECT_FALSE(a.BitwiseEqual(b));
  // +0 and -0 compare equal as numbers but not bitwise.
  Tensor zero = Tensor::FromDouble(ElementType::kF32, {1}, std::vector<double>{0.0});
  EXPECT_FALSE(
      zero.BitwiseEqual(Tensor::FromDouble(ElementType::kF32, {1}, std::vector<double>{-0.0})));
}

}  // namespace
}  // namespace commir::runtime
