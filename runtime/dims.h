// Dimension bookkeeping shared by every host-side tensor operation (runtime/host_ops.h
// and the cpu kernels): how a shape reads in an error message and how a possibly
// negative dimension index becomes a checked one.
#ifndef COMMIR_RUNTIME_DIMS_H_
#define COMMIR_RUNTIME_DIMS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir::runtime {

// "[2, 3]".
std::string ShapeToString(absl::Span<const int64_t> shape);

// `dim` in [-rank, rank) as an index in [0, rank); out of range is an error naming
// `op_name`.
absl::StatusOr<int64_t> NormalizeDim(std::string_view op_name, int64_t dim, int64_t rank);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_DIMS_H_
