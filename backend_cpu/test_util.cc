#include "backend_cpu/test_util.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/in_place.h"
#include "runtime/tensor.h"

namespace commir::cpu::testing {

Tensor RandomTensor(ElementType type, std::vector<int64_t> shape, uint32_t seed, double low,
                    double high) {
  std::mt19937 generator(seed);
  Tensor tensor(type, std::move(shape));
  if (IsIntegerType(type)) {
    std::uniform_int_distribution<int64_t> distribution(static_cast<int64_t>(low),
                                                        static_cast<int64_t>(high));
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      tensor.SetFromDouble(i, static_cast<double>(distribution(generator)));
    }
  } else {
    std::uniform_real_distribution<double> distribution(low, high);
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      tensor.SetFromDouble(i, distribution(generator));
    }
  }
  return tensor;
}

std::vector<int64_t> Unravel(int64_t flat_index, absl::Span<const int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat_index % shape[d];
    flat_index /= shape[d];
  }
  return index;
}

int64_t Ravel(absl::Span<const int64_t> index, absl::Span<const int64_t> shape) {
  int64_t flat_index = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat_index = flat_index * shape[d] + index[d];
  return flat_index;
}

double RoundTo(ElementType type, double value) {
  Tensor scalar(type, {});
  scalar.SetFromDouble(0, value);
  return scalar.GetAsDouble(0);
}

double RoundingTolerance(ElementType type) {
  switch (type) {
    case ElementType::kF64: return 1e-12;
    case ElementType::kF32: return 2e-6;
    case ElementType::kF16: return 1.0 / 1024;
    case ElementType::kBF16: return 1.0 / 128;
    default: return 0.0;
  }
}

void ExpectTensorNear(const Tensor& actual, ElementType type, absl::Span<const int64_t> shape,
                      absl::Span<const double> expected, double rtol, double atol) {
  ASSERT_EQ(actual.element_type(), type) << actual.DebugTypeString();
  ASSERT_EQ(actual.shape(), std::vector<int64_t>(shape.begin(), shape.end()))
      << actual.DebugTypeString();
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.num_elements());
  int mismatches = 0;
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    const double got = actual.GetAsDouble(i);
    const double want = expected[i];
    bool ok;
    if (std::isnan(want) || std::isnan(got)) {
      ok = std::isnan(want) && std::isnan(got);
    } else if (std::isinf(want) || std::isinf(got)) {
      ok = got == want;
    } else {
      ok = std::fabs(got - want) <= atol + rtol * std::fabs(want);
    }
    if (!ok && ++mismatches <= 10) {
      ADD_FAILURE() << "element " << i << " [" << absl::StrJoin(Unravel(i, shape), ", ") << "] of "
                    << actual.DebugTypeString() << ": got " << got << ", expected " << want
                    << " (rtol " << rtol << ", atol " << atol << ")";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

void ExpectTensorEq(const Tensor& actual, ElementType type, absl::Span<const int64_t> shape,
                    absl::Span<const double> expected) {
  ExpectTensorNear(actual, type, shape, expected, 0.0, 0.0);
}

void ExpectInvalidArgument(const absl::Status& status,
                           std::initializer_list<std::string_view> fragments) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string_view message(status.message().data(), status.message().size());
  for (std::string_view fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string_view::npos)
        << "\"" << message << "\" lacks \"" << fragment << "\"";
  }
}

MatrixOperand SliceView(const Tensor& base, int64_t dim, int64_t offset, int64_t size) {
  std::optional<runtime::MatrixBlock> block =
      runtime::SliceAsMatrices(base.shape(), dim, offset, size);
  EXPECT_TRUE(block.has_value());
  MatrixOperand operand;
  operand.tensor = &base;
  operand.shape.assign(base.shape().begin(), base.shape().end());
  const int64_t d = dim < 0 ? dim + base.rank() : dim;
  operand.shape[d] = size;
  operand.block = block.value_or(runtime::MatrixBlock{});
  operand.sliced_dim = d;
  operand.offset = offset;
  return operand;
}

}  // namespace commir::cpu::testing
