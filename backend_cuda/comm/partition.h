// Which groups of mesh devices a collective spans, inferred from one group and the mesh
// shape. Plain C++ (no CUDA) so that it is tested everywhere.
#ifndef COMMIR_BACKEND_CUDA_COMM_PARTITION_H_
#define COMMIR_BACKEND_CUDA_COMM_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir::cuda::comm {

// The mesh partition containing `group` (an axis group is the devices sharing all
// coordinates except those of its axes, ordered by linearized coordinate over its axes
// in the order the program writes them, first axis major: `(tp, dp)` on a (dp, tp) mesh
// is not ascending device order). The axes whose coordinates differ between members are
// the group's axes; the result lists every group of the partition, each in the same
// axis order as `group` (so position p means the same coordinates in every group),
// ordered by first member. A one-member group gives the partition into singletons.
// InvalidArgument when `group` is not exactly one such group in some order of its axes,
// or names a device outside the mesh.
absl::StatusOr<std::vector<std::vector<int64_t>>> InferPartition(
    absl::Span<const int64_t> mesh_shape, absl::Span<const int64_t> group);

// Bit i set when mesh axis i varies inside `group`. (Not enough to identify a
// partition's member order: (dp, tp) and (tp, dp) have the same mask.) Assumes `group` passed InferPartition.
uint64_t GroupAxesMask(absl::Span<const int64_t> mesh_shape, absl::Span<const int64_t> group);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_PARTITION_H_
