// Exact operations on whole host tensors that both the runtime (splitting and assembling
// global values, runtime/host_layout.h) and the cpu backend's kernels need: boxes cut out
// of and written into tensors, concatenation, constant tensors and the in-order fold that
// all_reduce performs. They live here, below the backends, so that the runtime and the
// cuda path never reach up into backend_cpu for them.
#ifndef COMMIR_RUNTIME_HOST_OPS_H_
#define COMMIR_RUNTIME_HOST_OPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// Copies the box of `x` that starts at `start` and has the extents of `result` into
// `result` (the box must lie inside x).
void CopyBoxOut(const Tensor& x, absl::Span<const int64_t> start, Tensor& result);

// Copies all of `part` into the box of `result` that starts at `start` (the box must lie
// inside result).
void CopyBoxIn(const Tensor& part, absl::Span<const int64_t> start, Tensor& result);

// The box of x at `start` with extents `size` (one entry per dimension each).
absl::StatusOr<Tensor> Slice(const Tensor& x, absl::Span<const int64_t> start,
                             absl::Span<const int64_t> size);

// Concatenation along `dim` of one or more tensors of one element type and rank that agree
// on every other dimension.
absl::StatusOr<Tensor> Concat(absl::Span<const Tensor* const> parts, int64_t dim);

// A tensor of `shape` (extents >= 0) with every element `value` rounded to `type`.
Tensor Full(ElementType type, absl::Span<const int64_t> shape, double value);

// How CombineInOrder folds two values.
enum class HostCombine { kSum, kMax, kMin };

// parts[0] combined with parts[1], then parts[2], ... elementwise, as all_reduce does:
// floats in f32 (f64 for f64) rounded to the element type once, integers in i64 wrapping
// like add; max and min propagate NaN. The parts must be non-empty and share one type
// (checked by the caller, which names the operation in its error).
Tensor CombineInOrder(absl::Span<const Tensor* const> parts, HostCombine combine);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_HOST_OPS_H_
