#include "runtime/tensor.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "commir/float16.h"
#include "commir/scalar_math.h"

namespace commir::runtime {
namespace {

// Converts to double rounding "to odd" (truncate, then set the lowest bit if anything was
// lost), so that a later round-to-nearest-even into bf16 is correct even above 2^53.
double Int64ToDoubleRoundingToOdd(int64_t value) {
  const uint64_t magnitude =
      value < 0 ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  const int significant_bits = 64 - std::countl_zero(magnitude);
  if (significant_bits <= 53) return static_cast<double>(value);
  const int shift = significant_bits - 53;
  uint64_t kept = magnitude >> shift;
  if ((magnitude & ((uint64_t{1} << shift) - 1)) != 0) kept |= 1;
  const double result = std::ldexp(static_cast<double>(kept), shift);
  return value < 0 ? -result : result;
}

}  // namespace

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

Tensor::Tensor(ElementType type, std::vector<int64_t> shape)
    : type_(type), shape_(std::move(shape)), num_elements_(NumElements(shape_)) {
  for ([[maybe_unused]] int64_t extent : shape_) assert(extent >= 0);
  bytes_.resize(static_cast<size_t>(num_elements_) * ElementTypeByteWidth(type_));
}

Tensor Tensor::OnDevice(ElementType type, std::vector<int64_t> shape,
                        std::shared_ptr<DeviceStorage> storage) {
  Tensor tensor;
  tensor.type_ = type;
  tensor.shape_ = std::move(shape);
  tensor.num_elements_ = NumElements(tensor.shape_);
  tensor.storage_ = std::move(storage);
  return tensor;
}

double Tensor::GetAsDouble(int64_t flat_index) const {
  switch (type_) {
    case ElementType::kF64: return data<double>()[flat_index];
    case ElementType::kF32: return data<float>()[flat_index];
    case ElementType::kF16: return HalfBitsToFloat(data<uint16_t>()[flat_index]);
    case ElementType::kBF16: return BFloat16BitsToFloat(data<uint16_t>()[flat_index]);
    case ElementType::kI64: return static_cast<double>(data<int64_t>()[flat_index]);
    case ElementType::kI32: return data<int32_t>()[flat_index];
    case ElementType::kI1: return data<uint8_t>()[flat_index] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

void Tensor::SetFromDouble(int64_t flat_index, double value) {
  switch (type_) {
    case ElementType::kF64: data<double>()[flat_index] = value; return;
    case ElementType::kF32: data<float>()[flat_index] = static_cast<float>(value); return;
    case ElementType::kF16: data<uint16_t>()[flat_index] = DoubleToHalfBits(value); return;
    case ElementType::kBF16: data<uint16_t>()[flat_index] = DoubleToBFloat16Bits(value); return;
    case ElementType::kI64:
      data<int64_t>()[flat_index] = scalar_math::RoundToIntegerSaturating<int64_t>(value);
      return;
    case ElementType::kI32:
      data<int32_t>()[flat_index] = scalar_math::RoundToIntegerSaturating<int32_t>(value);
      return;
    case ElementType::kI1: data<uint8_t>()[flat_index] = value != 0.0 ? 1 : 0; return;
  }
}

std::vector<float> Tensor::ToFloat() const {
  std::vector<float> values(num_elements_);
  switch (type_) {
    case ElementType::kF32: std::copy_n(data<float>(), num_elements_, values.data()); break;
    case ElementType::kF16:
      for (int64_t i = 0; i < num_elements_; ++i) values[i] = HalfBitsToFloat(data<uint16_t>()[i]);
      break;
    case ElementType::kBF16:
      for (int64_t i = 0; i < num_elements_; ++i) {
        values[i] = BFloat16BitsToFloat(data<uint16_t>()[i]);
      }
      break;
    case ElementType::kF64:
      for (int64_t i = 0; i < num_elements_; ++i) values[i] = static_cast<float>(data<double>()[i]);
      break;
    case ElementType::kI64:
      // Direct int64 -> float conversion rounds once (through double it could round twice).
      for (int64_t i = 0; i < num_elements_; ++i) {
        values[i] = static_cast<float>(data<int64_t>()[i]);
      }
      break;
    case ElementType::kI32:
    case ElementType::kI1:
      for (int64_t i = 0; i < num_elements_; ++i) values[i] = static_cast<float>(GetAsDouble(i));
      break;
  }
  return values;
}

std::vector<double> Tensor::ToDouble() const {
  std::vector<double> values(num_elements_);
  if (type_ == ElementType::kF64) {
    std::copy_n(data<double>(), num_elements_, values.data());
  } else {
    for (int64_t i = 0; i < num_elements_; ++i) values[i] = GetAsDouble(i);
  }
  return values;
}

std::vector<int64_t> Tensor::ToInt64() const {
  std::vector<int64_t> values(num_elements_);
  switch (type_) {
    case ElementType::kI64: std::copy_n(data<int64_t>(), num_elements_, values.data()); break;
    case ElementType::kI32:
      for (int64_t i = 0; i < num_elements_; ++i) values[i] = data<int32_t>()[i];
      break;
    case ElementType::kI1:
      for (int64_t i = 0; i < num_elements_; ++i) values[i] = data<uint8_t>()[i] != 0 ? 1 : 0;
      break;
    case ElementType::kF64:
    case ElementType::kF32:
    case ElementType::kF16:
    case ElementType::kBF16:
      for (int64_t i = 0; i < num_elements_; ++i) {
        values[i] = scalar_math::RoundToIntegerSaturating<int64_t>(GetAsDouble(i));
      }
      break;
  }
  return values;
}

Tensor Tensor::FromFloat(ElementType type, std::vector<int64_t> shape,
                         absl::Span<const float> values) {
  Tensor tensor(type, std::move(shape));
  assert(static_cast<int64_t>(values.size()) == tensor.num_elements());
  const int64_t n = tensor.num_elements();
  switch (type) {
    case ElementType::kF32: std::copy_n(values.data(), n, tensor.data<float>()); break;
    case ElementType::kF16:
      for (int64_t i = 0; i < n; ++i) tensor.data<uint16_t>()[i] = FloatToHalfBits(values[i]);
      break;
    case ElementType::kBF16:
      for (int64_t i = 0; i < n; ++i) tensor.data<uint16_t>()[i] = FloatToBFloat16Bits(values[i]);
      break;
    case ElementType::kF64:
    case ElementType::kI64:
    case ElementType::kI32:
    case ElementType::kI1:
      // Widening to double is exact, so this rounds exactly once.
      for (int64_t i = 0; i < n; ++i) tensor.SetFromDouble(i, values[i]);
      break;
  }
  return tensor;
}

Tensor Tensor::FromDouble(ElementType type, std::vector<int64_t> shape,
                          absl::Span<const double> values) {
  Tensor tensor(type, std::move(shape));
  assert(static_cast<int64_t>(values.size()) == tensor.num_elements());
  if (type == ElementType::kF64) {
    std::copy_n(values.data(), tensor.num_elements(), tensor.data<double>());
  } else {
    for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.SetFromDouble(i, values[i]);
  }
  return tensor;
}

Tensor Tensor::FromInt64(ElementType type, std::vector<int64_t> shape,
                         absl::Span<const int64_t> values) {
  Tensor tensor(type, std::move(shape));
  assert(static_cast<int64_t>(values.size()) == tensor.num_elements());
  const int64_t n = tensor.num_elements();
  switch (type) {
    case ElementType::kI64: std::copy_n(values.data(), n, tensor.data<int64_t>()); break;
    case ElementType::kI32:
      for (int64_t i = 0; i < n; ++i) tensor.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
      break;
    case ElementType::kI1:
      for (int64_t i = 0; i < n; ++i) tensor.data<uint8_t>()[i] = values[i] != 0 ? 1 : 0;
      break;
    case ElementType::kF64:
      for (int64_t i = 0; i < n; ++i) tensor.data<double>()[i] = static_cast<double>(values[i]);
      break;
    case ElementType::kF32:
      for (int64_t i = 0; i < n; ++i) tensor.data<float>()[i] = static_cast<float>(values[i]);
      break;
    case ElementType::kF16:
    case ElementType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        tensor.SetFromDouble(i, Int64ToDoubleRoundingToOdd(values[i]));
      }
      break;
  }
  return tensor;
}

bool Tensor::BitwiseEqual(const Tensor& other) const {
  return type_ == other.type_ && shape_ == other.shape_ && storage_ == other.storage_ &&
         bytes_ == other.bytes_;
}

std::string Tensor::DebugTypeString() const {
  return absl::StrFormat("%s[%s]", ElementTypeName(type_), absl::StrJoin(shape_, ", "));
}

}  // namespace commir::runtime
