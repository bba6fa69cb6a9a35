#include "runtime/strided_copy.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"

namespace commir::runtime {
namespace {

// Copies one innermost row. A compile-time width lets memcpy become a single move.
template <int kWidth>
void CopyRow(const std::byte* source, int64_t source_stride, std::byte* destination,
             int64_t destination_stride, int64_t count) {
  if (source_stride == 1 && destination_stride == 1) {
    std::memcpy(destination, source, static_cast<size_t>(count) * kWidth);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(destination + i * destination_stride * kWidth, source + i * source_stride * kWidth,
                kWidth);
  }
}

using RowCopier = void (*)(const std::byte*, int64_t, std::byte*, int64_t, int64_t);

RowCopier RowCopierForWidth(int element_width) {
  switch (element_width) {
    case 1: return CopyRow<1>;
    case 2: return CopyRow<2>;
    case 4: return CopyRow<4>;
    default: return CopyRow<8>;
  }
}

}  // namespace

void CopyStrided(absl::Span<const int64_t> extent, int element_width, ConstStridedView source,
                 StridedView destination) {
  for (int64_t e : extent) {
    if (e == 0) return;
  }
  const auto* source_bytes = static_cast<const std::byte*>(source.data);
  auto* destination_bytes = static_cast<std::byte*>(destination.data);
  const RowCopier copy_row = RowCopierForWidth(element_width);
  const size_t rank = extent.size();
  if (rank == 0) {
    copy_row(source_bytes + source.offset * element_width, 1,
             destination_bytes + destination.offset * element_width, 1, 1);
    return;
  }

  // Odometer over all dimensions but the innermost, which CopyRow handles.
  const size_t outer_rank = rank - 1;
  std::vector<int64_t> index(outer_rank, 0);
  int64_t source_position = source.offset;
  int64_t destination_position = destination.offset;
  while (true) {
    copy_row(source_bytes + source_position * element_width, source.strides[outer_rank],
             destination_bytes + destination_position * element_width,
             destination.strides[outer_rank], extent[outer_rank]);
    // Advance the odometer; the copy is done once the outermost dimension wraps around.
    size_t d = outer_rank;
    for (; d > 0; --d) {
      const size_t dim = d - 1;
      source_position += source.strides[dim];
      destination_position += destination.strides[dim];
      if (++index[dim] < extent[dim]) break;
      source_position -= source.strides[dim] * extent[dim];
      destination_position -= destination.strides[dim] * extent[dim];
      index[dim] = 0;
    }
    if (d == 0) return;
  }
}

}  // namespace commir::runtime
