#include "runtime/random_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

constexpr int64_t kManyElements = 1 << 17;

TEST(RandomInputsTest, ValuesArePinned) {
  // commir-run's random inputs must not change between versions: results saved from
  // one run are compared with later ones.
  EXPECT_EQ(RandomUniformValue(0, 0, 0), 0x1.3836e97a68cbcp-2);
  EXPECT_EQ(RandomUniformValue(0, 0, 1), 0x1.9c15182fa20a4p-2);
  EXPECT_EQ(RandomUniformValue(42, 1, 7), 0x1.5cef48abd5d38p-3);
  EXPECT_EQ(RandomUniformValue(~uint64_t{0}, 3, 1000000), 0x1.226671d1ea644p-2);
}

TEST(RandomInputsTest, IsDeterministic) {
  for (ElementType type : kAllElementTypes) {
    const Tensor a = RandomGlobalTensor(7, 2, type, {33, 5});
    const Tensor b = RandomGlobalTensor(7, 2, type, {33, 5});
    EXPECT_TRUE(a.BitwiseEqual(b)) << a.DebugTypeString();
    EXPECT_EQ(a.DebugTypeString(), std::string(ElementTypeName(type)) + "[33, 5]");
  }
}

TEST(RandomInputsTest, SeedsAndArgumentsGiveDifferentValues) {
  const std::vector<int64_t> shape = {64};
  const Tensor base = RandomGlobalTensor(1, 0, ElementType::kF64, shape);
  for (const Tensor& other : {RandomGlobalTensor(2, 0, ElementType::kF64, shape),
                              RandomGlobalTensor(1, 1, ElementType::kF64, shape),
                              RandomGlobalTensor(0, 1, ElementType::kF64, shape)}) {
    int equal = 0;
    for (int64_t i = 0; i < 64; ++i) equal += base.GetAsDouble(i) == other.GetAsDouble(i);
    EXPECT_EQ(equal, 0);
  }
}

TEST(RandomInputsTest, ArgumentsAreUncorrelated) {
  double dot = 0;
  for (int64_t i = 0; i < kManyElements; ++i) {
    dot += RandomUniformValue(5, 0, i) * RandomUniformValue(5, 1, i);
  }
  // Each product has variance 1/9, so the mean's standard deviation is ~0.0009.
  EXPECT_LT(std::abs(dot / kManyElements), 0.005);
}

TEST(RandomInputsTest, IsUniformOnMinusOneToOne) {
  const Tensor t = RandomGlobalTensor(123, 4, ElementType::kF64, {kManyElements});
  double sum = 0, sum_squares = 0, low = 1, high = -1;
  int below_zero = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = t.GetAsDouble(i);
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 1.0);
    sum += v;
    sum_squares += v * v;
    low = std::min(low, v);
    high = std::max(high, v);
    below_zero += v < 0;
  }
  // Mean 0 (standard deviation of the sample mean ~0.0016), variance 1/3.
  EXPECT_LT(std::abs(sum / kManyElements), 0.01);
  EXPECT_NEAR(sum_squares / kManyElements, 1.0 / 3.0, 0.01);
  EXPECT_LT(low, -0.999);
  EXPECT_GT(high, 0.999);
  EXPECT_NEAR(static_cast<double>(below_zero) / kManyElements, 0.5, 0.01);
}

TEST(RandomInputsTest, ElementValuesDependOnlyOnTheFlatIndex) {
  const Tensor flat = RandomGlobalTensor(9, 3, ElementType::kF32, {24});
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{2, 3, 4}, {24, 1}, {6, 4}, {48}}) {
    const Tensor shaped = RandomGlobalTensor(9, 3, ElementType::kF32, shape);
    for (int64_t i = 0; i < 24; ++i) {
      ASSERT_EQ(shaped.data<float>()[i], flat.data<float>()[i]) << i;
      ASSERT_EQ(shaped.data<float>()[i], static_cast<float>(RandomUniformValue(9, 3, i))) << i;
    }
  }
  const Tensor scalar = RandomGlobalTensor(9, 3, ElementType::kF32, {});
  EXPECT_EQ(scalar.data<float>()[0], flat.data<float>()[0]);
  EXPECT_EQ(RandomGlobalTensor(9, 3, ElementType::kF32, {0, 5}).num_elements(), 0);
}

TEST(RandomInputsTest, FloatsRoundToNearestEvenFromTheSameValues) {
  const std::vector<int64_t> shape = {1000};
  const Tensor f64 = RandomGlobalTensor(11, 0, ElementType::kF64, shape);
  for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    const Tensor narrow = RandomGlobalTensor(11, 0, type, shape);
    Tensor expected(type, shape);
    for (int64_t i = 0; i < 1000; ++i) expected.SetFromDouble(i, f64.GetAsDouble(i));
    EXPECT_TRUE(narrow.BitwiseEqual(expected)) << ElementTypeName(type);
  }
}

TEST(RandomInputsTest, IntegersAreMinusOneZeroOrOne) {
  for (ElementType type : {ElementType::kI64, ElementType::kI32}) {
    const Tensor t = RandomGlobalTensor(3, 1, type, {kManyElements});
    int64_t counts[3] = {0, 0, 0};
    for (int64_t i = 0; i < kManyElements; ++i) {
      const double v = t.GetAsDouble(i);
      ASSERT_TRUE(v == -1 || v == 0 || v == 1) << v;
      ASSERT_EQ(v, std::nearbyint(RandomUniformValue(3, 1, i)));
      ++counts[static_cast<int>(v) + 1];
    }
    EXPECT_NEAR(static_cast<double>(counts[0]) / kManyElements, 0.25, 0.01);
    EXPECT_NEAR(static_cast<double>(counts[1]) / kManyElements, 0.5, 0.01);
    EXPECT_NEAR(static_cast<double>(counts[2]) / kManyElements, 0.25, 0.01);
  }
}

TEST(RandomInputsTest, BooleansAreTheSignOfTheValue) {
  const Tensor t = RandomGlobalTensor(3, 1, ElementType::kI1, {kManyElements});
  int64_t ones = 0;
  for (int64_t i = 0; i < kManyElements; ++i) {
    const uint8_t bit = t.data<uint8_t>()[i];
    ASSERT_EQ(bit, RandomUniformValue(3, 1, i) >= 0 ? 1 : 0);
    ones += bit;
  }
  EXPECT_NEAR(static_cast<double>(ones) / kManyElements, 0.5, 0.01);
}

}  // namespace
}  // namespace commir::runtime
