// The cuda backend's collectives by op kind: how each maps onto the engine's contiguous,
// rank-major blocks (its geometry) and which engine call carries it out.
//
// Collectives along any dimension use the engine's contiguous blocks:
//   all_gather dim d:      recv [n, part...] -> move axis 0 to d, merge it with dim d
//   reduce_scatter dim d:  x viewed [.., n, x_d / n, ..] -> move the n axis to the front
//   all_to_all s -> c:     like reduce_scatter on s before, like all_gather on c after
// A move is skipped when every dimension it crosses has extent 1 (the bytes are already
// in order), which is the common case of dim 0.
#ifndef COMMIR_BACKEND_CUDA_COLLECTIVE_KERNELS_H_
#define COMMIR_BACKEND_CUDA_COLLECTIVE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend_cuda/comm/collective_engine.h"
#include "commir/ir.h"
#include "commir/op_kernel_table.h"

namespace commir::cuda {

struct CollectiveGeometry {
  int64_t pre_dim = -1;   // split this dim into n blocks and bring them to the front
  int64_t post_dim = -1;  // move the leading block axis of recv to this dim and merge
  std::vector<int64_t> recv_shape;    // as the engine fills it
  std::vector<int64_t> result_shape;  // as the op returns it
};

struct CollectiveKernel {
  // The geometry for members holding parts of `shape` in a group of n; an error for
  // dimensions that are out of range or do not split into n blocks.
  absl::StatusOr<CollectiveGeometry> (*plan)(const Operation& op, absl::Span<const int64_t> shape,
                                             absl::string_view part_type, int64_t n) = nullptr;
  // The engine call on the members' send/recv buffers of `count` elements each.
  absl::Status (*run)(comm::CollectiveEngine& engine, const Operation& op,
                      absl::Span<const int64_t> group, absl::Span<const comm::MemberBuffers> local,
                      int64_t count, ElementType type) = nullptr;

  explicit operator bool() const { return plan != nullptr && run != nullptr; }
};

using CollectiveKernelTable = OpKernelTable<CollectiveKernel>;

// The collectives the backend runs (built once).
const CollectiveKernelTable& CudaCollectiveKernels();

// Ok when every collective op has a kernel; otherwise an error naming each one without.
absl::Status CheckCudaCollectiveKernels(const CollectiveKernelTable& table);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_COLLECTIVE_KERNELS_H_
