// The dropout kernel: the mask from commir/philox.h, the header the cpu kernel draws
// from, so both backends keep and drop the same elements, bit for bit.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_DROPOUT_H_
#define COMMIR_BACKEND_CUDA_KERNELS_DROPOUT_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// y[j] = x[j] * scale where philox::DropoutKeeps(seed, global index of j, threshold,
// step), else 0, for the row-major block `dims` of a float `dtype`; element j at local position
// (i_0, ...) has global index base + sum(i_d * global_strides[d]). Computed in f32 (f64
// for f64), scale rounded to that type, one rounding on store: as the cpu kernel.
// cudaErrorInvalidValue for a non-float dtype, mismatched ranks, or a block whose
// dimensions do not merge to kMaxRank or fewer. y may alias x. `step`: null (step 0), or
// the device address of an i32 or i64 scalar (`step_dtype`), read by the kernel so that
// no value travels to the host before the launch; an i32 is sign-extended, then read as
// a 64-bit word, as the cpu kernel reads it.
cudaError_t LaunchDropout(KDType dtype, const void* x, void* y, std::span<const int64_t> dims,
                          uint64_t base, std::span<const uint64_t> global_strides, uint64_t seed,
                          uint64_t threshold, double scale, cudaStream_t stream,
                          const void* step = nullptr, KDType step_dtype = KDType::kI64);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_DROPOUT_H_
