// Data movement (layout.h). Everything is one strided copy over a merged index space,
// except transposes that move the innermost dimension, which go through 32x32
// shared-memory tiles so that both the reads and the writes are coalesced.
#include "backend_cuda/kernels/layout.h"

#include <cstdint>
#include <vector>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/shape_helpers.h"

namespace commir::cuda_kernels {
namespace {

// Copies a StridedSpace<2> (operand 0 = source, 1 = destination) of U-sized units.
template <typename U>
__global__ void StridedCopyKernel(const U* __restrict__ src, U* __restrict__ dst, int64_t n,
                                  StridedSpace<2> space) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t off[2];
    StridedOffsets(space, i, off);
    dst[off[1]] = src[off[0]];
  }
}

template <typename U>
cudaError_t LaunchStridedUnits(const void* src, void* dst, const StridedSpace<2>& space,
                               cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < space.rank; ++d) n *= space.dims[d];
  StridedCopyKernel<U><<<GridFor(n), kThreads, 0, stream>>>(static_cast<const U*>(src),
                                                            static_cast<U*>(dst), n, space);
  return cudaGetLastError();
}

// Copies `dims` elements of `esize` bytes from src + src_base with src_strides to
// dst + dst_base with dst_strides (all in elements).
cudaError_t StridedCopy(int esize, const void* src, int64_t src_base,
                        std::vector<int64_t> src_strides, void* dst, int64_t dst_base,
                        std::vector<int64_t> dst_strides, std::span<const int64_t> dims,
                        cudaStream_t stream) {
  if (NumElementsOf(dims) == 0) return cudaSuccess;
  const std::vector<int64_t> strides[2] = {std::move(src_strides), std::move(dst_strides)};
  StridedSpace<2> space;
  if (!BuildStridedSpace<2>(dims, strides, &space)) return cudaErrorInvalidValue;
  const char* s = static_cast<const char*>(src) + src_base * esize;
  char* d = static_cast<char*>(dst) + dst_base * esize;
  if (space.rank == 0) return cudaMemcpyAsync(d, s, esize, cudaMemcpyDeviceToDevice, stream);
  const int last = space.rank - 1;
  if (space.rank == 1 && space.strides[0][0] == 1 && space.strides[1][0] == 1) {
    return cudaMemcpyAsync(d, s, static_cast<size_t>(space.dims[0]) * esize,
                           cudaMemcpyDeviceToDevice, stream);
  }
  // Widen the unit to up to 16 bytes when the innermost run is contiguous on both sides
  // and every offset stays a multiple of the wider unit: vector loads and stores.
  int unit = esize;
  if (space.strides[0][last] == 1 && space.strides[1][last] == 1) {
    for (int w = 16; w > esize; w /= 2) {
      bool ok = (space.dims[last] * esize) % w == 0 &&
                reinterpret_cast<uintptr_t>(s) % w == 0 && reinterpret_cast<uintptr_t>(d) % w == 0;
      for (int k = 0; k < 2 && ok; ++k) {
        for (int i = 0; i < last && ok; ++i) ok = (space.strides[k][i] * esize) % w == 0;
      }
      if (ok) {
        unit = w;
        break;
      }
    }
    if (unit != esize) {
      space.dims[last] = space.dims[last] * esize / unit;
      for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < last; ++i) space.strides[k][i] = space.strides[k][i] * esize / unit;
      }
    }
  } else {
    // Strides stay in elements of esize bytes.
  }
  switch (unit) {
    case 1: return LaunchStridedUnits<uint8_t>(s, d, space, stream);
    case 2: return LaunchStridedUnits<uint16_t>(s, d, space, stream);
    case 4: return LaunchStridedUnits<uint32_t>(s, d, space, stream);
    case 8: return LaunchStridedUnits<uint64_t>(s, d, space, stream);
    case 16: return LaunchStridedUnits<uint4>(s, d, space, stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---- Tiled transpose ----------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kTileRows = 8;

// The 2-D problem inside a transpose: dimension A is contiguous in the source, B in the
// destination; `batch` walks the remaining dimensions (operand 0 source, 1 destination).
struct TileProblem {
  int64_t ext_a, ext_b;
  int64_t src_stride_b;  // source stride of B (A's is 1)
  int64_t dst_stride_a;  // destination stride of A (B's is 1)
  int64_t tiles_a, tiles_b, batches;
  StridedSpace<2> batch;
};

template <typename U>
__global__ void TransposeTileKernel(const U* __restrict__ src, U* __restrict__ dst,
                                    TileProblem p) {
  __shared__ U tile[kTile][kTile + 1];  // +1: column reads hit distinct banks
  const int64_t total = p.tiles_a * p.tiles_b * p.batches;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t ta = t % p.tiles_a;
    const int64_t tb = (t / p.tiles_a) % p.tiles_b;
    const int64_t bi = t / (p.tiles_a * p.tiles_b);
    int64_t off[2];
    StridedOffsets(p.batch, bi, off);
    const int64_t a0 = ta * kTile, b0 = tb * kTile;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t a = a0 + threadIdx.x, b = b0 + j;
      if (a < p.ext_a && b < p.ext_b) tile[j][threadIdx.x] = src[off[0] + b * p.src_stride_b + a];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t a = a0 + j, b = b0 + threadIdx.x;
      if (a < p.ext_a && b < p.ext_b) dst[off[1] + a * p.dst_stride_a + b] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

template <typename U>
cudaError_t LaunchTile(const void* src, void* dst, const TileProblem& p, cudaStream_t stream) {
  const int64_t total = p.tiles_a * p.tiles_b * p.batches;
  const int blocks = GridFor(total * kThreads);
  TransposeTileKernel<U><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const U*>(src), static_cast<U*>(dst), p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchTranspose(KDType dtype, const void* x, std::span<const int64_t> shape,
                            std::span<const int64_t> perm, void* y, cudaStream_t stream) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (static_cast<int64_t>(perm.size()) != rank) return cudaErrorInvalidValue;
  const int esize = KDTypeSize(dtype);
  std::vector<int64_t> in_strides = RowMajorStridesOf(shape);
  std::vector<int64_t> out_dims(rank), src_strides(rank);
  std::vector<bool> seen(rank, false);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t p = NormalizeDimIndex(perm[i], rank);
    if (p < 0 || seen[p]) return cudaErrorInvalidValue;
    seen[p] = true;
    out_dims[i] = shape[p];
    src_strides[i] = in_strides[p];
  }
  if (NumElementsOf(out_dims) == 0) return cudaSuccess;
  const std::vector<int64_t> strides[2] = {src_strides, RowMajorStridesOf(out_dims)};
  StridedSpace<2> space;
  if (!BuildStridedSpace<2>(out_dims, strides, &space)) return cudaErrorInvalidValue;
  const int last = space.rank - 1;
  // The source's contiguous dimension, if any survived merging.
  int a_dim = -1;
  for (int i = 0; i < space.rank; ++i) {
    if (space.strides[0][i] == 1) a_dim = i;
  }
  if (space.rank < 2 || a_dim < 0 || a_dim == last) {
    // The innermost dimension stays innermost: a plain strided copy is coalesced already.
    return StridedCopy(esize, x, 0, src_strides, y, 0, RowMajorStridesOf(out_dims), out_dims,
                       stream);
  }
  TileProblem p;
  p.ext_a = space.dims[a_dim];
  p.ext_b = space.dims[last];
  p.src_stride_b = space.strides[0][last];
  p.dst_stride_a = space.strides[1][a_dim];
  p.tiles_a = (p.ext_a + kTile - 1) / kTile;
  p.tiles_b = (p.ext_b + kTile - 1) / kTile;
  p.batches = 1;
  p.batch.rank = 0;
  for (int i = 0; i < last; ++i) {
    if (i == a_dim) continue;
    const int r = p.batch.rank++;
    p.batch.dims[r] = space.dims[i];
    p.batch.strides[0][r] = space.strides[0][i];
    p.batch.strides[1][r] = space.strides[1][i];
    p.batches *= space.dims[i];
  }
  switch (esize) {
    case 1: return LaunchTile<uint8_t>(x, y, p, stream);
    case 2: return LaunchTile<uint16_t>(x, y, p, stream);
    case 4: return LaunchTile<uint32_t>(x, y, p, stream);
    case 8: return LaunchTile<uint64_t>(x, y, p, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchSlice(KDType dtype, const void* x, std::span<const int64_t> shape,
                        std::span<const int64_t> start, std::span<const int64_t> size, void* y,
                        cudaStream_t stream) {
  const size_t rank = shape.size();
  if (start.size() != rank || size.size() != rank) return cudaErrorInvalidValue;
  const std::vector<int64_t> in_strides = RowMajorStridesOf(shape);
  int64_t base = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || size[i] < 0 || start[i] > shape[i] - size[i]) {
      return cudaErrorInvalidValue;
    }
    base += start[i] * in_strides[i];
  }
  return StridedCopy(KDTypeSize(dtype), x, base, in_strides, y, 0, RowMajorStridesOf(size), size,
                     stream);
}

cudaError_t LaunchInsertBox(KDType dtype, const void* src, std::span<const int64_t> src_shape,
                            void* dst, std::span<const int64_t> dst_shape,
                            std::span<const int64_t> start, cudaStream_t stream) {
  const size_t rank = dst_shape.size();
  if (src_shape.size() != rank || start.size() != rank) return cudaErrorInvalidValue;
  const std::vector<int64_t> dst_strides = RowMajorStridesOf(dst_shape);
  int64_t base = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || src_shape[i] < 0 || start[i] > dst_shape[i] - src_shape[i]) {
      return cudaErrorInvalidValue;
    }
    base += start[i] * dst_strides[i];
  }
  return StridedCopy(KDTypeSize(dtype), src, 0, RowMajorStridesOf(src_shape), dst, base,
                     dst_strides, src_shape, stream);
}

cudaError_t LaunchConcat(KDType dtype, std::span<const void* const> parts,
                         std::span<const std::span<const int64_t>> part_shapes, int64_t dim,
                         void* y, cudaStream_t stream) {
  if (parts.empty() || parts.size() != part_shapes.size()) return cudaErrorInvalidValue;
  const int64_t rank = static_cast<int64_t>(part_shapes[0].size());
  const int64_t d = NormalizeDimIndex(dim, rank);
  if (d < 0) return cudaErrorInvalidValue;
  std::vector<int64_t> out_shape(part_shapes[0].begin(), part_shapes[0].end());
  out_shape[d] = 0;
  for (const std::span<const int64_t> shape : part_shapes) {
    if (static_cast<int64_t>(shape.size()) != rank) return cudaErrorInvalidValue;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != d && shape[i] != out_shape[i]) return cudaErrorInvalidValue;
    }
    out_shape[d] += shape[d];
  }
  std::vector<int64_t> start(rank, 0);
  for (size_t p = 0; p < parts.size(); ++p) {
    if (cudaError_t e = LaunchInsertBox(dtype, parts[p], part_shapes[p], y, out_shape, start,
                                        stream);
        e != cudaSuccess) {
      return e;
    }
    start[d] += part_shapes[p][d];
  }
  return cudaSuccess;
}

cudaError_t LaunchBroadcast(KDType dtype, const void* x, std::span<const int64_t> x_shape,
                            void* y, std::span<const int64_t> out_shape, cudaStream_t stream) {
  std::vector<int64_t> src_strides;
  if (!BroadcastStrides(x_shape, out_shape, &src_strides)) return cudaErrorInvalidValue;
  return StridedCopy(KDTypeSize(dtype), x, 0, std::move(src_strides), y, 0,
                     RowMajorStridesOf(out_shape), out_shape, stream);
}

cudaError_t LaunchDynamicSlice(KDType dtype, const void* x, std::span<const int64_t> shape,
                               int64_t dim, int64_t offset, int64_t size, void* y,
                               cudaStream_t stream) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = NormalizeDimIndex(dim, rank);
  if (d < 0) return cudaErrorInvalidValue;
  std::vector<int64_t> start(rank, 0);
  std::vector<int64_t> sizes(shape.begin(), shape.end());
  start[d] = offset;
  sizes[d] = size;
  return LaunchSlice(dtype, x, shape, start, sizes, y, stream);
}

cudaError_t LaunchDynamicUpdateSliceInPlace(KDType dtype, void* x,
                                            std::span<const int64_t> shape,
                                            const void* update, int64_t update_extent,
                                            int64_t dim, int64_t offset, cudaStream_t stream) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = NormalizeDimIndex(dim, rank);
  if (d < 0) return cudaErrorInvalidValue;
  std::vector<int64_t> start(rank, 0);
  std::vector<int64_t> update_shape(shape.begin(), shape.end());
  start[d] = offset;
  update_shape[d] = update_extent;
  return LaunchInsertBox(dtype, update, update_shape, x, shape, start, stream);
}

}  // namespace commir::cuda_kernels
