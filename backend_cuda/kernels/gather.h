// gather and scatter_add on the device (docs/language.md, "gather", "scatter_add"): the
// table seen as [outer, rows, inner] around the gathered axis, the indices (i32 or i64)
// as `count` flat entries, the gathered rows as [outer, count, inner]. An index outside
// [0, rows) (after subtracting gather's offset) raises kErrIndexOutOfRange in
// `error_flag` and contributes a zero row (gather) or nothing (scatter_add), except for a
// masked gather (a device's share of a split table), where such rows are zero by
// definition. Launch-only; outputs must not alias inputs.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_GATHER_H_
#define COMMIR_BACKEND_CUDA_KERNELS_GATHER_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

struct RowsShape {
  int64_t outer = 1;
  int64_t rows = 0;
  int64_t inner = 1;
  int64_t count = 0;  // indices
};

// out[o, k, :] = table[o, indices[k] - offset, :]: a copy, bit for bit with the cpu.
cudaError_t LaunchGather(KDType dtype, const void* table, const RowsShape& shape,
                         KDType index_type, const void* indices, int64_t offset, bool masked,
                         void* out, int32_t* error_flag, cudaStream_t stream);

// out = base with updates[o, k, :] added at row indices[k]. One thread per (outer, inner)
// column walks the indices in order, so repeated indices sum in the cpu kernel's order and
// the result is the same bits, with no atomics. `acc` is a buffer of base's element count
// in the compute type (f32 for f32/f16/bf16, f64 for f64, i64 for integers), rounded into
// `out` once at the end; it may be `out` itself where the compute type is the storage
// type (f32, f64, i64). `offset` and `masked` as for LaunchGather: a masked scatter_add
// skips the indices outside its block.
cudaError_t LaunchScatterAdd(KDType dtype, const void* base, const RowsShape& shape,
                             KDType index_type, const void* indices, int64_t offset,
                             bool masked, const void* updates, void* acc, void* out,
                             int32_t* error_flag, cudaStream_t stream);

// The element type of scatter_add's accumulator for `dtype`.
constexpr KDType ScatterAddComputeType(KDType dtype) {
  if (dtype == KDType::kF64) return KDType::kF64;
  return KDTypeIsFloat(dtype) ? KDType::kF32 : KDType::kI64;
}

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_GATHER_H_
