#include "backend_cpu/shape_util.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::cpu {

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(std::string_view op_name,
                                                     absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Walk from the trailing dimension; a missing leading dimension acts as 1.
    const int64_t a_extent = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t b_extent = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (a_extent != b_extent && a_extent != 1 && b_extent != 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: shapes %s and %s cannot be broadcast together", op_name,
                          ShapeToString(a), ShapeToString(b)));
    }
    result[rank - 1 - i] = a_extent == 1 ? b_extent : a_extent;
  }
  return result;
}

std::vector<int64_t> BroadcastStrides(absl::Span<const int64_t> source_shape,
                                      absl::Span<const int64_t> target_shape) {
  const std::vector<int64_t> source_strides = runtime::RowMajorStrides(source_shape);
  const size_t leading = target_shape.size() - source_shape.size();
  std::vector<int64_t> strides(target_shape.size(), 0);
  for (size_t i = 0; i < source_shape.size(); ++i) {
    // An extent-1 source dimension repeats its only element along the target dimension.
    if (source_shape[i] != 1) strides[leading + i] = source_strides[i];
  }
  return strides;
}

absl::Status CheckSameElementType(std::string_view op_name, const runtime::Tensor& a,
                                  const runtime::Tensor& b) {
  if (a.element_type() != b.element_type()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: operands must have the same element type, got %s and %s", op_name,
                        a.DebugTypeString(), b.DebugTypeString()));
  }
  return absl::OkStatus();
}

absl::Status CheckFloatType(std::string_view op_name, const runtime::Tensor& x) {
  if (!IsFloatType(x.element_type())) {
    return absl::InvalidArgumentError(absl::StrFormat("%s requires a floating-point tensor, got %s",
                                                      op_name, x.DebugTypeString()));
  }
  return absl::OkStatus();
}

}  // namespace commir::cpu
