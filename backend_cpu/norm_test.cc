#include <cmath>
#include <cstdint>
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
using ::commir::cpu::testing::ExpectTensorEq;
using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::RoundingTolerance;
using ::commir::cpu::testing::RoundTo;
using ::commir::cpu::testing::Unravel;

constexpr ElementType kFloatTypes[] = {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                                       ElementType::kBF16};

// f64 softmax along `dim`, written from the definition exp(x_i) / sum_j exp(x_j) with the
// maximum subtracted (an identity) so large inputs do not overflow the reference.
std::vector<double> ReferenceSoftmax(const Tensor& x, int64_t dim) {
  std::vector<double> result(x.num_elements());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const std::vector<int64_t> index = Unravel(i, x.shape());
    std::vector<int64_t> other = index;
    double maximum = -INFINITY;
    for (int64_t j = 0; j < x.dim(dim); ++j) {
      other[dim] = j;
      maximum = std::max(maximum, x.GetAsDouble(Ravel(other, x.shape())));
    }
    double sum = 0;
    for (int64_t j = 0; j < x.dim(dim); ++j) {
      other[dim] = j;
      sum += std::exp(x.GetAsDouble(Ravel(other, x.shape())) - maximum);
    }
    result[i] = std::exp(x.GetAsDouble(i) - maximum) / sum;
  }
  return result;
}

TEST(SoftmaxTest, EveryDimAndTypeMatchesReference) {
  const std::vector<int64_t> shape = {3, 4, 5};
  for (ElementType type : kFloatTypes) {
    const Tensor x = RandomTensor(type, shape, 1, -4, 4);
    for (int64_t dim = -3; dim < 3; ++dim) {
      std::vector<double> expected = ReferenceSoftmax(x, dim < 0 ? dim + 3 : dim);
      for (double& value : expected) value = RoundTo(type, value);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Softmax(x, dim));
      ExpectTensorNear(result, type, shape, expected,
                       type == ElementType::kF32 ? 1e-6 : RoundingTolerance(type));
      if (::testing::Test::HasFailure()) FAIL() << "dim " << dim << " " << ElementTypeName(type);
    }
  }
}

TEST(SoftmaxTest, LargeMaskedAndDegenerateInputs) {
  const double inf = std::numeric_limits<double>::infinity();
  // Large inputs would overflow exp without the max subtraction; -inf entries get 0.
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {2, 3},
                                      std::vector<double>{1000, 1001, -inf, -inf, -inf, -inf});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Softmax(x, 1));
  const double p = 1.0 / (1.0 + std::exp(1.0));
  ExpectTensorNear(result, ElementType::kF32, {2, 3}, {p, 1 - p, 0, NAN, NAN, NAN}, 1e-6);
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor scalar,
      Softmax(Tensor::FromDouble(ElementType::kF32, {}, std::vector<double>{3}), -1));
  ExpectTensorEq(scalar, ElementType::kF32, {}, {1.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor single,
      Softmax(Tensor::FromDouble(ElementType::kBF16, {2, 1}, std::vector<double>{3, -7}), 1));
  ExpectTensorEq(single, ElementType::kBF16, {2, 1}, {1.0, 1.0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor empty, Softmax(Tensor(ElementType::kF32, {0, 4}), 1));
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 4}));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor empty_dim, Softmax(Tensor(ElementType::kF32, {2, 0}), 1));
  EXPECT_EQ(empty_dim.shape(), (std::vector<int64_t>{2, 0}));
}

TEST(SoftmaxTest, Errors) {
  ExpectInvalidArgument(Softmax(Tensor(ElementType::kF32, {2, 3}), 2).status(),
                        {"softmax", "dimension 2"});
  ExpectInvalidArgument(Softmax(Tensor(ElementType::kI32, {2}), 0).status(),
                        {"softmax", "floating-point"});
}

// f64 layernorm / rmsnorm of each row of the last dimension, from the definitions.
std::vector<double> ReferenceNorm(const Tensor& x, const Tensor& weight, const Tensor* bias,
                                  double eps) {
  const int64_t n = x.dim(x.rank() - 1);
  std::vector<double> result(x.num_elements());
  for (int64_t row = 0; row * n < x.num_elements(); ++row) {
    double mean = 0, mean_square = 0;
    for (int64_t i = 0; i < n; ++i) {
      mean += x.GetAsDouble(row * n + i) / n;
      mean_square += x.GetAsDouble(row * n + i) * x.GetAsDouble(row * n + i) / n;
    }
    double variance = 0;
    for (int64_t i = 0; i < n; ++i) {
      variance += std::pow(x.GetAsDouble(row * n + i) - mean, 2) / n;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double value = x.GetAsDouble(row * n + i);
      result[row * n + i] =
          bias != nullptr ? (value - mean) / std::sqrt(variance + eps) * weight.GetAsDouble(i) +
                                bias->GetAsDouble(i)
                          : value / std::sqrt(mean_square + eps) * weight.GetAsDouble(i);
    }
  }
  return result;
}

TEST(LayerNormTest, MatchesReferenceForEveryType) {
  for (ElementType type : kFloatTypes) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{2, 3, 64}, {5}, {4, 1}}) {
      // An offset mean makes the two-pass variance matter.
      const Tensor x = RandomTensor(type, shape, 2, 3, 5);
      const Tensor weight = RandomTensor(ElementType::kF32, {shape.back()}, 3, 0.5, 1.5);
      const Tensor bias = RandomTensor(type, {shape.back()}, 4);
      std::vector<double> expected = ReferenceNorm(x, weight, &bias, 1e-5);
      for (double& value : expected) value = RoundTo(type, value);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, LayerNorm(x, weight, bias, 1e-5));
      // f32: the centred values carry the rounding of x (about 2^-24 * 5) relative to a
      // standard deviation of about 0.6, so about 1e-5 absolute after scaling.
      const double atol = type == ElementType::kF64   ? 1e-12
                          : type == ElementType::kF32 ? 2e-5
                                                      : 1e-3;
      ExpectTensorNear(result, type, shape, expected, RoundingTolerance(type), atol);
      if (::testing::Test::HasFailure())
        FAIL() << ElementTypeName(type) << " rank " << shape.size();
    }
  }
}

TEST(RmsNormTest, MatchesReferenceForEveryType) {
  for (ElementType type : kFloatTypes) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{2, 3, 64}, {7}, {3, 1}}) {
      const Tensor x = RandomTensor(type, shape, 5);
      const Tensor weight = RandomTensor(type, {shape.back()}, 6, 0.5, 1.5);
      std::vector<double> expected = ReferenceNorm(x, weight, nullptr, 1e-6);
      for (double& value : expected) value = RoundTo(type, value);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, RmsNorm(x, weight, 1e-6));
      ExpectTensorNear(result, type, shape, expected,
                       type == ElementType::kF32 ? 1e-6 : RoundingTolerance(type), 1e-6);
      if (::testing::Test::HasFailure())
        FAIL() << ElementTypeName(type) << " rank " << shape.size();
    }
  }
}

TEST(NormTest, EpsilonDominatesConstantRows) {
  // A constant row has zero variance: the output is bias (layernorm) and, for all-zero
  // input, zero (rmsnorm), with no division by zero.
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {1, 4}, std::vector<double>(4, 2.0));
  const Tensor weight = Tensor::FromDouble(ElementType::kF32, {4}, std::vector<double>(4, 3.0));
  const Tensor bias = Tensor::FromDouble(ElementType::kF32, {4}, std::vector<double>{1, 2, 3, 4});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor layernorm, LayerNorm(x, weight, bias, 1e-5));
  ExpectTensorEq(layernorm, ElementType::kF32, {1, 4}, {1, 2, 3, 4});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor rmsnorm,
                              RmsNorm(Tensor(ElementType::kF32, {2, 4}), weight, 1e-6));
  ExpectTensorEq(rmsnorm, ElementType::kF32, {2, 4}, std::vector<double>(8, 0.0));
}

TEST(NormTest, Errors) {
  const Tensor x(ElementType::kF32, {2, 4});
  const Tensor weight(ElementType::kF32, {4});
  ExpectInvalidArgument(LayerNorm(x, Tensor(ElementType::kF32, {3}), weight, 1e-5).status(),
                        {"layernorm", "weight", "f32[3]"});
  ExpectInvalidArgument(LayerNorm(x, weight, Tensor(ElementType::kF32, {1, 4}), 1e-5).status(),
                        {"bias", "f32[1, 4]"});
  ExpectInvalidArgument(LayerNorm(Tensor(ElementType::kF32, {}), weight, weight, 1e-5).status(),
                        {"rank >= 1"});
  ExpectInvalidArgument(RmsNorm(Tensor(ElementType::kI32, {2, 4}), weight, 1e-5).status(),
                        {"rmsnorm", "floating-point"});
  ExpectInvalidArgument(RmsNorm(x, Tensor(ElementType::kI32, {4}), 1e-5).status(),
                        {"rmsnorm", "i32[4]"});
}

}  // namespace
}  // namespace commir::cpu
