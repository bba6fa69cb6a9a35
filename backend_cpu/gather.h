// The cpu backend's gather and scatter_add kernels (docs/language.md, "gather",
// "scatter_add"), declared apart from kernels.h so the op pair stays in its own files.
#ifndef COMMIR_BACKEND_CPU_GATHER_H_
#define COMMIR_BACKEND_CPU_GATHER_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// table[:axis] + indices + table[axis+1:]: the rows of `table` along `axis` at `indices`
// (an i32 or i64 tensor), copied bit for bit (any element type). Without `offset`, an
// index outside [0, table.dim(axis)) is an InvalidArgument error naming it and its
// position. With `offset` (a device's share of a lookup in a table split along axis,
// whose rows start at global row `offset`), index i reads row i - offset where that is in
// range and gives a zero row elsewhere.
absl::StatusOr<runtime::Tensor> Gather(const runtime::Tensor& table, const runtime::Tensor& indices,
                                       int64_t axis, std::optional<int64_t> offset = std::nullopt);

// base with updates[..., k, ...] added at row indices[k] of `axis`; updates has the shape
// gather(base, indices) has. Repeated indices sum. The sums are deterministic: each
// element starts at base's value and adds its updates in the order of the indices
// (row-major), computing in f32 (f64 for f64, i64 wrapping for integers) and rounding
// once when stored, as the other kernels do. Out-of-range indices are errors as in Gather;
// with `offset` (base is a device's block of a base split along axis, from global row
// `offset`), index i adds to row i - offset where that is in range and is skipped
// elsewhere.
absl::StatusOr<runtime::Tensor> ScatterAdd(const runtime::Tensor& base,
                                           const runtime::Tensor& indices,
                                           const runtime::Tensor& updates, int64_t axis,
                                           std::optional<int64_t> offset = std::nullopt);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_GATHER_H_
