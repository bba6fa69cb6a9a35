// Moving between global tensors and the per-device parts their layout describes
// (docs/language.md, "Tensor types"), on the host: how commir-run feeds a spmd function and reassembles
// its results.
//
// Conventions:
//  - A split dimension gives device c (its linearized coordinate over the dimension's
//    axes, first axis major) block c.
//  - A `partial(...)` input is handed out with the whole value on the device whose
//    coordinates along the partial axes are all 0 and zeros elsewhere: the addends sum
//    to the value exactly.
//  - On assembly, replicas (devices that differ only along axes the layout does not
//    mention) must hold bit-identical parts: a mismatch is an error, because a
//    replicated result that differs between devices is a wrong program. Partial results
//    are summed over the partial axes as all_reduce sums them (runtime/host_ops.h): in
//    coordinate order, first listed axis major, rounded to the element type once.
//  - Every part must have the layout's per-device type (LocalType); a part of another
//    shape or element type is an error rather than a wrongly tiled value.
//  - A zigzag dimension (Type::zigzag_dim) split over n devices is cut into 2n chunks and
//    device c holds chunks c and 2n-1-c: the contiguous layout of the value with its
//    chunks reordered (ZigzagOrder), so both directions go through that reordering.
#ifndef COMMIR_RUNTIME_HOST_LAYOUT_H_
#define COMMIR_RUNTIME_HOST_LAYOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/mesh.h"
#include "commir/type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// `x` with the 2n equal chunks of dimension `dim` in zigzag order: 0, 2n-1, 1, 2n-2, ...
// (block c of n then holds chunks c and 2n-1-c). `to_zigzag` false applies the inverse.
// 2n must divide the dimension.
absl::StatusOr<runtime::Tensor> ZigzagOrder(const runtime::Tensor& x, int64_t dim, int64_t n,
                                            bool to_zigzag);

// Device `device`'s part of `global` laid out as `type` on `mesh` (null: one device).
absl::StatusOr<runtime::Tensor> LocalPart(const runtime::Tensor& global, Type type,
                                          const Mesh* mesh, int64_t device);

// The global value from parts[d], the part held by device d, laid out as `type`.
absl::StatusOr<runtime::Tensor> AssembleGlobal(absl::Span<const runtime::Tensor* const> parts,
                                               Type type, const Mesh* mesh);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_HOST_LAYOUT_H_
