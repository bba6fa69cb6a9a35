#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

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
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::RoundingTolerance;
using ::commir::cpu::testing::RoundTo;
using ::commir::cpu::testing::Unravel;

struct Reference {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// Straightforward f64 batched matmul with NumPy batch broadcasting.
Reference ReferenceMatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const int64_t ra = a.rank(), rb = b.rank();
  const int64_t m = transpose_a ? a.dim(ra - 1) : a.dim(ra - 2);
  const int64_t k = transpose_a ? a.dim(ra - 2) : a.dim(ra - 1);
  const int64_t n = transpose_b ? b.dim(rb - 2) : b.dim(rb - 1);
  const std::vector<int64_t> a_batch(a.shape().begin(), a.shape().end() - 2);
  const std::vector<int64_t> b_batch(b.shape().begin(), b.shape().end() - 2);
  const size_t batch_rank = std::max(a_batch.size(), b_batch.size());
  std::vector<int64_t> batch(batch_rank);
  for (size_t i = 0; i < batch_rank; ++i) {
    const int64_t ea = i < a_batch.size() ? a_batch[a_batch.size() - 1 - i] : 1;
    const int64_t eb = i < b_batch.size() ? b_batch[b_batch.size() - 1 - i] : 1;
    batch[batch_rank - 1 - i] = ea == 1 ? eb : ea;
  }
  // The operand's flat element index for a result batch index and matrix coordinates.
  auto element = [&](const Tensor& x, const std::vector<int64_t>& x_batch,
                     const std::vector<int64_t>& batch_index, int64_t row, int64_t col) {
    std::vector<int64_t> index;
    for (size_t d = 0; d < x_batch.size(); ++d) {
      index.push_back(x_batch[d] == 1 ? 0 : batch_index[batch_rank - x_batch.size() + d]);
    }
    index.push_back(row);
    index.push_back(col);
    return x.GetAsDouble(Ravel(index, x.shape()));
  };
  Reference result;
  result.shape = batch;
  result.shape.push_back(m);
  result.shape.push_back(n);
  for (int64_t flat = 0; flat < runtime::NumElements(result.shape); ++flat) {
    const std::vector<int64_t> index = Unravel(flat, result.shape);
    const std::vector<int64_t> batch_index(index.begin(), index.end() - 2);
    const int64_t i = index[batch_rank], j = index[batch_rank + 1];
    double sum = 0;
    for (int64_t l = 0; l < k; ++l) {
      const double x = transpose_a ? element(a, a_batch, batch_index, l, i)
                                   : element(a, a_batch, batch_index, i, l);
      const double y = transpose_b ? element(b, b_batch, batch_index, j, l)
                                   : element(b, b_batch, batch_index, l, j);
      sum += x * y;
    }
    result.values.push_back(sum);
  }
  return result;
}

struct MatMulCase {
  std::vector<int64_t> a, b;
  bool transpose_a, transpose_b;
};

const std::vector<MatMulCase>& Cases() {
  static const auto* cases = new std::vector<MatMulCase>{
      {{3, 4}, {4, 5}, false, false},
      {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},
      {{4, 3}, {5, 4}, true, true},
      {{2, 3, 4}, {4, 5}, false, false},         // b broadcast over a's batch
      {{4, 5}, {2, 5, 3}, false, false},         // a broadcast over b's batch
      {{2, 1, 3, 4}, {5, 4, 6}, false, false},   // batch [2, 1] x [5] -> [2, 5]
      {{3, 1, 4, 3}, {1, 2, 6, 4}, true, true},  // both broadcast, both transposed
      {{1, 1}, {1, 1}, false, false},
      {{2, 1, 7}, {2, 7, 1}, false, false},   // M = N = 1
      {{1, 33, 65}, {65, 17}, false, false},  // odd sizes through BLAS blocking
  };
  return *cases;
}

TEST(MatMulTest, FloatTypesMatchF64Reference) {
  for (ElementType type :
       {ElementType::kF64, ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    uint32_t seed = 1;
    for (const MatMulCase& c : Cases()) {
      const Tensor a = RandomTensor(type, c.a, seed++);
      const Tensor b = RandomTensor(type, c.b, seed++);
      const Reference reference = ReferenceMatMul(a, b, c.transpose_a, c.transpose_b);
      const int64_t k = c.transpose_a ? c.a[c.a.size() - 2] : c.a.back();
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, MatMul(a, b, c.transpose_a, c.transpose_b, type));
      // f32 accumulation of k products of magnitude < 1: absolute error about k * 2^-24.
      const double accumulation = type == ElementType::kF64 ? 1e-15 * k : 2e-7 * k;
      std::vector<double> expected = reference.values;
      for (double& value : expected) value = RoundTo(type, value);
      ExpectTensorNear(result, type, reference.shape, expected, RoundingTolerance(type),
                       accumulation);
      if (::testing::Test::HasFailure()) FAIL() << ElementTypeName(type) << " case " << seed / 2;
    }
  }
}

TEST(MatMulTest, SixteenBitInputsAccumulateInF32) {
  // 256 products of 1 + 2^-7 (exact in bf16): a bf16 accumulator would stall, an f32 one
  // gets 256 * (1 + 2^-7) = 258 exactly.
  const Tensor a = Tensor::FromDouble(ElementType::kBF16, {1, 256},
                                      std::vector<double>(256, 1 + std::ldexp(1.0, -7)));
  const Tensor b = Tensor::FromDouble(ElementType::kBF16, {256, 1}, std::vector<double>(256, 1.0));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor f32, MatMul(a, b, false, false, ElementType::kF32));
  ExpectTensorEq(f32, ElementType::kF32, {1, 1}, {258.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor bf16, MatMul(a, b, false, false, ElementType::kBF16));
  ExpectTensorEq(bf16, ElementType::kBF16, {1, 1}, {258.0});
  // The result type may differ from the operands'.
  const Tensor x = RandomTensor(ElementType::kF32, {3, 4}, 5);
  const Tensor y = RandomTensor(ElementType::kF32, {4, 2}, 6);
  const Reference reference = ReferenceMatMul(x, y, false, false);
  std::vector<double> expected = reference.values;
  for (double& value : expected) value = RoundTo(ElementType::kF16, value);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor f16, MatMul(x, y, false, false, ElementType::kF16));
  ExpectTensorNear(f16, ElementType::kF16, {3, 2}, expected, RoundingTolerance(ElementType::kF16),
                   1e-6);
}

TEST(MatMulTest, IntegerMatMulIsExact) {
  for (const MatMulCase& c : Cases()) {
    const Tensor a = RandomTensor(ElementType::kI32, c.a, 11, -50, 50);
    const Tensor b = RandomTensor(ElementType::kI32, c.b, 12, -50, 50);
    const Reference reference = ReferenceMatMul(a, b, c.transpose_a, c.transpose_b);
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result,
                                MatMul(a, b, c.transpose_a, c.transpose_b, ElementType::kI32));
    ExpectTensorEq(result, ElementType::kI32, reference.shape, reference.values);
  }
}

TEST(MatMulTest, EmptyDimensions) {
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor zero_k, MatMul(Tensor(ElementType::kF32, {2, 0}), Tensor(ElementType::kF32, {0, 3}),
                            false, false, ElementType::kF32));
  ExpectTensorEq(zero_k, ElementType::kF32, {2, 3}, std::vector<double>(6, 0.0));
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor zero_m, MatMul(Tensor(ElementType::kF64, {0, 4}), Tensor(ElementType::kF64, {4, 3}),
                            false, false, ElementType::kF64));
  EXPECT_EQ(zero_m.shape(), (std::vector<int64_t>{0, 3}));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor zero_batch, MatMul(Tensor(ElementType::kF32, {0, 2, 4}),
                                                        Tensor(ElementType::kF32, {4, 3}), false,
                                                        false, ElementType::kF32));
  EXPECT_EQ(zero_batch.shape(), (std::vector<int64_t>{0, 2, 3}));
}

TEST(MatMulTest, Errors) {
  const Tensor a(ElementType::kF32, {3, 4});
  ExpectInvalidArgument(
      MatMul(Tensor(ElementType::kF32, {4}), a, false, false, ElementType::kF32).status(),
      {"rank >= 2"});
  ExpectInvalidArgument(
      MatMul(a, Tensor(ElementType::kF32, {5, 2}), false, false, ElementType::kF32).status(),
      {"contracting", "4 vs 5"});
  ExpectInvalidArgument(
      MatMul(a, Tensor(ElementType::kF32, {3, 2}), true, true, ElementType::kF32).status(),
      {"3 vs 2"});
  ExpectInvalidArgument(
      MatMul(Tensor(ElementType::kF32, {2, 3, 4}), Tensor(ElementType::kF32, {3, 4, 5}), false,
             false, ElementType::kF32)
          .status(),
      {"[2]", "[3]"});
  ExpectInvalidArgument(
      MatMul(a, Tensor(ElementType::kBF16, {4, 2}), false, false, ElementType::kF32).status(),
      {"bf16[4, 2]"});
}

}  // namespace
}  // namespace commir::cpu
