#include "backend_cuda/shift_slot.h"

#include "runtime/in_place.h"

namespace commir::cuda {

std::optional<ShiftSlot> PlanShiftSlot(absl::Span<const int64_t> destination_dims,
                                       absl::Span<const int64_t> block_dims, int64_t dim,
                                       int64_t offset, int64_t element_bytes, comm::Route route) {
  const int64_t rank = static_cast<int64_t>(destination_dims.size());
  if (static_cast<int64_t>(block_dims.size()) != rank || element_bytes <= 0) return std::nullopt;
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return std::nullopt;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim && block_dims[d] != destination_dims[d]) return std::nullopt;
  }
  const std::optional<runtime::BlockRows> rows =
      runtime::SliceAsRows(destination_dims, dim, offset, block_dims[dim]);
  if (!rows.has_value()) return std::nullopt;
  // Byte counts fit: the destination's bytes are allocated.
  ShiftSlot slot;
  slot.byte_offset = rows->first * element_bytes;
  slot.pitch = rows->pitch * element_bytes;
  if (rows->contiguous()) {
    slot.width = rows->width * rows->rows * element_bytes;
    slot.rows = 1;
    slot.receive = SlotReceive::kOffsetPointer;
    return slot;
  }
  slot.width = rows->width * element_bytes;
  slot.rows = rows->rows;
  const bool copy_engine_here =
      route == comm::Route::kCopyEngine || route == comm::Route::kMemberStreamCopies;
  slot.receive = copy_engine_here ? SlotReceive::kStrided2D : SlotReceive::kStaged;
  return slot;
}

bool CarriedBlockContiguous(absl::Span<const int64_t> gathered_dims, int64_t dim,
                            int64_t size) {
  const std::optional<runtime::BlockRows> rows =
      runtime::SliceAsRows(gathered_dims, dim, 0, size);
  return rows.has_value() && rows->contiguous();
}

std::optional<int64_t> ContiguousBlockByteOffset(absl::Span<const int64_t> dims, int64_t dim,
                                                 int64_t offset, int64_t size,
                                                 int64_t element_bytes) {
  if (element_bytes <= 0) return std::nullopt;
  const std::optional<runtime::BlockRows> rows = runtime::SliceAsRows(dims, dim, offset, size);
  if (!rows.has_value() || !rows->contiguous()) return std::nullopt;
  // Fits: the tensor's bytes are allocated.
  return rows->first * element_bytes;
}

}  // namespace commir::cuda
