#include "runtime/host_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "commir/scalar_math.h"
#include "runtime/compute_values.h"
#include "runtime/dims.h"
#include "runtime/strided_copy.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

template <typename T>
T Combine(HostCombine op, T accumulator, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op != HostCombine::kSum && (std::isnan(accumulator) || std::isnan(value))) {
      return std::isnan(accumulator) ? accumulator : value;  // max and min propagate NaN
    }
  }
  switch (op) {
    case HostCombine::kMax: return std::max(accumulator, value);
    case HostCombine::kMin: return std::min(accumulator, value);
    default:
      if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(scalar_math::WrappingAdd(accumulator, value));  // wraps like add
      } else {
        return accumulator + value;
      }
  }
}

// Folds the parts into parts[0]'s values in coordinate order, in compute type T.
template <typename T>
Tensor ReduceInOrder(absl::Span<const Tensor* const> parts, HostCombine op) {
  std::vector<T> accumulator = LoadAs<T>(*parts[0]);
  for (size_t c = 1; c < parts.size(); ++c) {
    const std::vector<T> values = LoadAs<T>(*parts[c]);
    for (size_t i = 0; i < accumulator.size(); ++i) {
      accumulator[i] = Combine(op, accumulator[i], values[i]);
    }
  }
  return StoreAs<T>(parts[0]->element_type(), parts[0]->shape(), accumulator);
}

}  // namespace

void CopyBoxOut(const Tensor& x, absl::Span<const int64_t> start, Tensor& result) {
  const std::vector<int64_t> strides = RowMajorStrides(x.shape());
  int64_t offset = 0;
  for (size_t d = 0; d < start.size(); ++d) offset += start[d] * strides[d];
  const std::vector<int64_t> result_strides = RowMajorStrides(result.shape());
  CopyStrided(result.shape(), ElementTypeByteWidth(x.element_type()),
              ConstStridedView{x.raw_data(), offset, strides},
              StridedView{result.raw_data(), 0, result_strides});
}

void CopyBoxIn(const Tensor& part, absl::Span<const int64_t> start, Tensor& result) {
  const std::vector<int64_t> strides = RowMajorStrides(result.shape());
  int64_t offset = 0;
  for (size_t d = 0; d < start.size(); ++d) offset += start[d] * strides[d];
  const std::vector<int64_t> part_strides = RowMajorStrides(part.shape());
  CopyStrided(part.shape(), ElementTypeByteWidth(part.element_type()),
              ConstStridedView{part.raw_data(), 0, part_strides},
              StridedView{result.raw_data(), offset, strides});
}

absl::StatusOr<Tensor> Slice(const Tensor& x, absl::Span<const int64_t> start,
                             absl::Span<const int64_t> size) {
  if (static_cast<int64_t>(start.size()) != x.rank() ||
      static_cast<int64_t>(size.size()) != x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("slice: start %s and size %s need one entry per dimension of %s",
                        ShapeToString(start), ShapeToString(size), x.DebugTypeString()));
  }
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (start[d] < 0 || size[d] < 0 || start[d] > x.dim(d) - size[d]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("slice: start %s with size %s does not fit in %s (dimension %d)",
                          ShapeToString(start), ShapeToString(size), x.DebugTypeString(), d));
    }
  }
  Tensor result(x.element_type(), std::vector<int64_t>(size.begin(), size.end()));
  CopyBoxOut(x, start, result);
  return result;
}

absl::StatusOr<Tensor> Concat(absl::Span<const Tensor* const> parts, int64_t dim) {
  if (parts.empty()) return absl::InvalidArgumentError("concat: needs at least one operand");
  const Tensor& first = *parts[0];
  absl::StatusOr<int64_t> concat_dim = NormalizeDim("concat", dim, first.rank());
  if (!concat_dim.ok()) return concat_dim.status();
  std::vector<int64_t> result_shape = first.shape();
  result_shape[*concat_dim] = 0;
  for (const Tensor* part : parts) {
    bool compatible = part->element_type() == first.element_type() && part->rank() == first.rank();
    for (int64_t d = 0; compatible && d < first.rank(); ++d) {
      compatible = d == *concat_dim || part->dim(d) == first.dim(d);
    }
    if (!compatible) {
      return absl::InvalidArgumentError(
          absl::StrFormat("concat: %s and %s cannot be concatenated along dimension %d",
                          first.DebugTypeString(), part->DebugTypeString(), *concat_dim));
    }
    result_shape[*concat_dim] += part->dim(*concat_dim);
  }
  Tensor result(first.element_type(), result_shape);
  std::vector<int64_t> start(first.rank(), 0);
  for (const Tensor* part : parts) {
    CopyBoxIn(*part, start, result);
    start[*concat_dim] += part->dim(*concat_dim);
  }
  return result;
}

Tensor Full(ElementType type, absl::Span<const int64_t> shape, double value) {
  Tensor result(type, std::vector<int64_t>(shape.begin(), shape.end()));
  if (result.num_elements() == 0) return result;
  result.SetFromDouble(0, value);
  const int width = ElementTypeByteWidth(type);
  auto* bytes = static_cast<std::byte*>(result.raw_data());
  for (int64_t i = 1; i < result.num_elements(); ++i) std::memcpy(bytes + i * width, bytes, width);
  return result;
}

Tensor CombineInOrder(absl::Span<const Tensor* const> parts, HostCombine combine) {
  const ElementType type = parts[0]->element_type();
  if (IsIntegerType(type)) return ReduceInOrder<int64_t>(parts, combine);
  return DispatchFloatCompute(
      type, [&](auto zero) { return ReduceInOrder<decltype(zero)>(parts, combine); });
}

}  // namespace commir::runtime
