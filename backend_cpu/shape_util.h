// Shape arithmetic shared by the CPU kernels: dimension normalisation, NumPy
// broadcasting and shape formatting for error messages.
#ifndef COMMIR_BACKEND_CPU_SHAPE_UTIL_H_
#define COMMIR_BACKEND_CPU_SHAPE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/dims.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// Shape text and dimension normalisation live in the runtime (host_ops uses them too).
using runtime::NormalizeDim;
using runtime::ShapeToString;

// The NumPy broadcast of two shapes: aligned at the trailing dimension, each pair of
// extents equal or one of them 1.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(std::string_view op_name,
                                                     absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b);

// Element strides that read a row-major tensor of `source_shape` as if it had been
// broadcast to `target_shape` (stride 0 along broadcast dimensions). The shapes must be
// broadcast-compatible with rank(source) <= rank(target).
std::vector<int64_t> BroadcastStrides(absl::Span<const int64_t> source_shape,
                                      absl::Span<const int64_t> target_shape);

// InvalidArgument unless a and b have the same element type.
absl::Status CheckSameElementType(std::string_view op_name, const runtime::Tensor& a,
                                  const runtime::Tensor& b);

// InvalidArgument unless x has a floating-point element type.
absl::Status CheckFloatType(std::string_view op_name, const runtime::Tensor& x);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_SHAPE_UTIL_H_
