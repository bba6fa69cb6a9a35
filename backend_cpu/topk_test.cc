#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::RandomTensor;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The expected indices of one row by counting, not sorting: entry j's place is the number
// of entries that outrank it (NaN above numbers, larger values, then lower indices).
std::vector<int64_t> RankedIndices(const std::vector<double>& row, int64_t k) {
  const int64_t n = static_cast<int64_t>(row.size());
  std::vector<int64_t> by_place(n, -1);
  for (int64_t j = 0; j < n; ++j) {
    int64_t place = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i == j) continue;
      const bool nan_i = std::isnan(row[i]), nan_j = std::isnan(row[j]);
      const bool outranks = nan_i != nan_j ? nan_i
                            : (nan_i || row[i] == row[j]) ? i < j
                                                          : row[i] > row[j];
      place += outranks ? 1 : 0;
    }
    by_place[place] = j;
  }
  return std::vector<int64_t>(by_place.begin(), by_place.begin() + k);
}

TEST(TopK, NanFirstAndTiesByLowerIndex) {
  const Tensor x =
      Tensor::FromDouble(ElementType::kF32, {1, 8}, {1, 3, 3, 2, 3, kNan, 0, -0.0});
  absl::StatusOr<TopKResult> r = TopK(x, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->indices.ToInt64(), (std::vector<int64_t>{5, 1, 2, 4, 3}));
  const std::vector<double> v = r->values.ToDouble();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(std::vector<double>(v.begin() + 1, v.end()), (std::vector<double>{3, 3, 3, 2}));
  EXPECT_EQ(r->values.element_type(), ElementType::kF32);
  EXPECT_EQ(r->indices.element_type(), ElementType::kI64);
  EXPECT_EQ(r->values.shape(), (std::vector<int64_t>{1, 5}));
}

TEST(TopK, SignedZerosAreEqualAndKeepTheirSign) {
  const Tensor x = Tensor::FromDouble(ElementType::kF64, {4}, {-0.0, 0.0, 1, 1});
  absl::StatusOr<TopKResult> r = TopK(x, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->indices.ToInt64(), (std::vector<int64_t>{2, 3, 0, 1}));
  EXPECT_TRUE(std::signbit(r->values.data<double>()[2]));
  EXPECT_FALSE(std::signbit(r->values.data<double>()[3]));
}

TEST(TopK, NanPayloadIsCopied) {
  Tensor x(ElementType::kF32, {3});
  const uint32_t payload_nan = 0x7fc01234u;
  float nan_value;
  std::memcpy(&nan_value, &payload_nan, 4);
  x.data<float>()[0] = 1.0f;
  x.data<float>()[1] = nan_value;
  x.data<float>()[2] = 2.0f;
  absl::StatusOr<TopKResult> r = TopK(x, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  uint32_t bits;
  std::memcpy(&bits, r->values.data<float>(), 4);
  EXPECT_EQ(bits, payload_nan);
}

TEST(TopK, EveryTypeAgreesWithRankCounting) {
  for (ElementType type : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                           ElementType::kBF16, ElementType::kI64, ElementType::kI32}) {
    // Few distinct values in the integer and 16-bit types: many ties.
    const Tensor x = RandomTensor(type, {2, 3, 37}, /*seed=*/7, -20, 20);
    for (int64_t k : {1, 5, 37}) {
      absl::StatusOr<TopKResult> r = TopK(x, k);
      ASSERT_TRUE(r.ok()) << r.status();
      const std::vector<double> all = x.ToDouble();
      const std::vector<int64_t> indices = r->indices.ToInt64();
      for (int64_t row = 0; row < 6; ++row) {
        const std::vector<double> values(all.begin() + row * 37, all.begin() + (row + 1) * 37);
        const std::vector<int64_t> expected = RankedIndices(values, k);
        for (int64_t t = 0; t < k; ++t) {
          ASSERT_EQ(indices[row * k + t], expected[t])
              << ElementTypeName(type) << " k=" << k << " row " << row << " place " << t;
          EXPECT_EQ(r->values.GetAsDouble(row * k + t), values[expected[t]]);
        }
      }
    }
  }
}

TEST(TopK, LargeIntegersCompareExactly) {
  // 2^53 + 1 and 2^53 are one double apart only if compared as integers.
  const int64_t big = int64_t{1} << 53;
  const Tensor x = Tensor::FromInt64(ElementType::kI64, {3}, {big, big + 1, -big});
  absl::StatusOr<TopKResult> r = TopK(x, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->indices.ToInt64(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r->values.ToInt64(), (std::vector<int64_t>{big + 1, big}));
}

TEST(TopK, Errors) {
  const Tensor x = RandomTensor(ElementType::kF32, {2, 4}, 1);
  ExpectInvalidArgument(TopK(x, 0).status(), {"k = 0", "[1, 4]"});
  ExpectInvalidArgument(TopK(x, 5).status(), {"k = 5"});
  ExpectInvalidArgument(TopK(RandomTensor(ElementType::kF32, {}, 1), 1).status(), {"rank >= 1"});
  ExpectInvalidArgument(TopK(Tensor(ElementType::kI1, {4}), 1).status(), {"float or integer"});
}

}  // namespace
}  // namespace commir::cpu
