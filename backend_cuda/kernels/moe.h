// moe_dispatch and moe_collect on the device (docs/language.md, "Mixture of experts"):
// the slot of every routing choice (commir/moe_routing.h's rule: every first choice in
// token order, then every second, ...; over capacity dropped), then row copies between
// choices and slots, bit for bit with the cpu. An expert index outside [0, experts)
// raises kErrIndexOutOfRange in `error_flag` and its choice is dropped. Launch-only;
// outputs must not alias inputs.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_MOE_H_
#define COMMIR_BACKEND_CUDA_KERNELS_MOE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

struct MoeShape {
  int64_t tokens = 0;
  int64_t k = 0;
  int64_t experts = 0;
  int64_t capacity = 0;  // per group
  int64_t hidden = 0;
  // Routing groups (commir::MoeSlots): the buffer is [experts, groups * capacity, hidden].
  int64_t groups = 1;
};

// slots[t * k + j] = (e * groups + g) * capacity + position, or -1 for a dropped choice.
// One thread per group and expert walks the choices in order and places its own, so the positions need no atomics
// and are the cpu's; the walk costs tokens x k reads per expert, which the row copies of
// hidden elements per choice outweigh for the layer sizes of current models.
cudaError_t LaunchMoeSlots(KDType index_type, const void* experts_of, const MoeShape& shape,
                           int64_t* slots, int32_t* error_flag, cudaStream_t stream);

// out [experts, capacity, hidden]: zeros, then each kept choice's row (rows [tokens,
// hidden] when !per_choice, [tokens, k, hidden] otherwise) at its slot.
cudaError_t LaunchMoeDispatch(KDType dtype, const void* rows, bool per_choice,
                              const MoeShape& shape, const int64_t* slots, void* out,
                              cudaStream_t stream);

// out [tokens, k, hidden]: each choice's slot of the buffer [experts, capacity, hidden],
// zeros for a dropped choice.
cudaError_t LaunchMoeCollect(KDType dtype, const void* buffer, const MoeShape& shape,
                             const int64_t* slots, void* out, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_MOE_H_
