// The one data-movement primitive behind the layout kernels (broadcast, transpose,
// slices, concatenation): copy an n-dimensional box of elements between two strided
// views of raw buffers.
#ifndef COMMIR_RUNTIME_STRIDED_COPY_H_
#define COMMIR_RUNTIME_STRIDED_COPY_H_

#include <cstdint>

#include "absl/types/span.h"

namespace commir::runtime {

// A view of a buffer: element (i0, i1, ...) lives at element offset
// `offset + i0 * strides[0] + i1 * strides[1] + ...` from `data`.
struct ConstStridedView {
  const void* data;
  int64_t offset;
  absl::Span<const int64_t> strides;
};
struct StridedView {
  void* data;
  int64_t offset;
  absl::Span<const int64_t> strides;
};

// For every index i in the box `extent`: destination[i] = source[i]. Elements are
// `element_width` bytes. Strides may be 0 (broadcast reads) but destination elements must
// not overlap. Both views need one stride per dimension of `extent`.
void CopyStrided(absl::Span<const int64_t> extent, int element_width, ConstStridedView source,
                 StridedView destination);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_STRIDED_COPY_H_
