// Host-side shape bookkeeping shared by the kernel launchers (no CUDA types): strided index
// spaces with adjacent dimensions merged, so most launches see rank 1-3.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_SHAPE_HELPERS_H_
#define COMMIR_BACKEND_CUDA_KERNELS_SHAPE_HELPERS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// A row-major index space `dims` walked with one stride per operand (in elements). Passed to
// kernels by value; dims[rank-1] varies fastest.
template <int kOperands>
struct StridedSpace {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kOperands][kMaxRank] = {};
};

inline int64_t NumElementsOf(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

inline std::vector<int64_t> RowMajorStridesOf(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

// Normalises a possibly negative dimension; -1 when out of range.
inline int64_t NormalizeDimIndex(int64_t dim, int64_t rank) {
  if (dim < 0) dim += rank;
  return dim >= 0 && dim < rank ? dim : -1;
}

// Builds a StridedSpace from per-dimension extents and strides, dropping extent-1
// dimensions and merging dimension i into i+1 when every operand's stride allows it
// (stride[i] == stride[i+1] * dims[i+1]). Returns false when the merged rank still
// exceeds kMaxRank. An empty `dims` (or all extents 1) gives rank 0: a single element.
template <int kOperands>
bool BuildStridedSpace(std::span<const int64_t> dims,
                       const std::vector<int64_t> (&strides)[kOperands],
                       StridedSpace<kOperands>* out) {
  std::vector<int64_t> d;
  std::vector<int64_t> s[kOperands];
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !d.empty();
    for (int k = 0; k < kOperands && merge; ++k) {
      merge = s[k].back() == strides[k][i] * dims[i];
    }
    if (merge) {
      d.back() *= dims[i];
      for (int k = 0; k < kOperands; ++k) s[k].back() = strides[k][i];
    } else {
      d.push_back(dims[i]);
      for (int k = 0; k < kOperands; ++k) s[k].push_back(strides[k][i]);
    }
  }
  if (d.size() > static_cast<size_t>(kMaxRank)) return false;
  out->rank = static_cast<int>(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    out->dims[i] = d[i];
    for (int k = 0; k < kOperands; ++k) out->strides[k][i] = s[k][i];
  }
  return true;
}

// Strides (in elements) with which an operand of `shape`, right-aligned against
// `out_shape` under NumPy broadcasting, is read; 0 along broadcast dimensions. Returns false
// when the shapes are not broadcast-compatible.
inline bool BroadcastStrides(std::span<const int64_t> shape, std::span<const int64_t> out_shape,
                             std::vector<int64_t>* strides) {
  if (shape.size() > out_shape.size()) return false;
  const size_t lead = out_shape.size() - shape.size();
  const std::vector<int64_t> own = RowMajorStridesOf(shape);
  strides->assign(out_shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == out_shape[lead + i]) {
      (*strides)[lead + i] = own[i];
    } else if (shape[i] != 1) {
      return false;
    }
  }
  return true;
}

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_SHAPE_HELPERS_H_
