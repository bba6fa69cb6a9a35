// Data movement kernels: any element type (they copy 1, 2, 4 or 8 byte elements), shapes
// row-major, dimensions may be negative. Arguments are assumed validated by the executor's
// shape inference (the cpu backend's error cases); inconsistent shapes, out-of-range boxes
// or ranks the kernels cannot handle return cudaErrorInvalidValue without launching.
// Outputs must not alias inputs. Launch-only.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_LAYOUT_H_
#define COMMIR_BACKEND_CUDA_KERNELS_LAYOUT_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// y.dim(i) = x.dim(perm[i]). Dimensions that stay adjacent are merged first; when the
// innermost dimension moves, a shared-memory tiled kernel keeps both sides coalesced.
cudaError_t LaunchTranspose(KDType dtype, const void* x, std::span<const int64_t> shape,
                            std::span<const int64_t> perm, void* y, cudaStream_t stream);

// y = x[start : start + size] in every dimension (y is `size`, row-major).
cudaError_t LaunchSlice(KDType dtype, const void* x, std::span<const int64_t> shape,
                        std::span<const int64_t> start, std::span<const int64_t> size, void* y,
                        cudaStream_t stream);

// Writes `src` (shape `src_shape`) into the box of `dst` (shape `dst_shape`, same rank)
// starting at `start`; the rest of dst is untouched. The inverse of LaunchSlice; concat and
// dynamic_update_slice are built on it, and the executor can use it to place blocks.
cudaError_t LaunchInsertBox(KDType dtype, const void* src, std::span<const int64_t> src_shape,
                            void* dst, std::span<const int64_t> dst_shape,
                            std::span<const int64_t> start, cudaStream_t stream);

// Concatenation along `dim` of parts[i] (shape part_shapes[i], all of one rank, agreeing
// off `dim`) into y. One launch per non-empty part.
cudaError_t LaunchConcat(KDType dtype, std::span<const void* const> parts,
                         std::span<const std::span<const int64_t>> part_shapes, int64_t dim,
                         void* y, cudaStream_t stream);

// NumPy broadcast of x (shape right-aligned against out_shape) to out_shape.
cudaError_t LaunchBroadcast(KDType dtype, const void* x, std::span<const int64_t> x_shape,
                            void* y, std::span<const int64_t> out_shape, cudaStream_t stream);

// dynamic_slice: `size` elements from `offset` along `dim` (offset is a host value the
// executor read before launch; 0 <= offset <= extent - size or cudaErrorInvalidValue).
cudaError_t LaunchDynamicSlice(KDType dtype, const void* x, std::span<const int64_t> shape,
                               int64_t dim, int64_t offset, int64_t size, void* y,
                               cudaStream_t stream);

// dynamic_update_slice IN PLACE: writes `update` (x's shape except `update_extent` along
// `dim`) into `x` from `offset` along `dim`. To keep x intact, copy it to the result buffer
// first and pass that buffer as x.
cudaError_t LaunchDynamicUpdateSliceInPlace(KDType dtype, void* x,
                                            std::span<const int64_t> shape,
                                            const void* update, int64_t update_extent,
                                            int64_t dim, int64_t offset, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_LAYOUT_H_
