// Where a shift's received block goes on the GPU when it lands straight in its slot of a
// gathered buffer (runtime/in_place.h: ShiftReceivesInto), decided without CUDA so that
// it is tested everywhere. The slot is SliceAsRows of the destination: a contiguous slot
// is an offset receive pointer on every route (NCCL's recv, the copy engine's
// cudaMemcpyAsync / cudaMemcpyPeerAsync, the IPC staging copy); a strided one is a 2-D
// copy (cudaMemcpy2DAsync: rows of `width` bytes, `pitch` bytes apart), which only the
// copy-engine routes inside one process issue. NCCL and the IPC path need contiguous
// memory, so there the block is received into a buffer of its own (staging) and the
// update copies it into the slot, as before.
#ifndef COMMIR_BACKEND_CUDA_SHIFT_SLOT_H_
#define COMMIR_BACKEND_CUDA_SHIFT_SLOT_H_

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "backend_cuda/comm/p2p_route.h"

namespace commir::cuda {

enum class SlotReceive {
  kOffsetPointer,  // the receive buffer is the slot: destination + byte_offset
  kStrided2D,      // a 2-D copy into the slot (copy engines in one process)
  kStaged,         // the route needs contiguous memory: decline, receive apart
};

struct ShiftSlot {
  int64_t byte_offset = 0;  // of the slot's first byte from the destination's start
  int64_t width = 0;        // bytes of one contiguous run (all of them when contiguous)
  int64_t pitch = 0;        // bytes from one run's start to the next's in the destination
  int64_t rows = 0;         // runs
  SlotReceive receive = SlotReceive::kStaged;
};

// The slot of a block of `block_dims` received at `offset` along `dim` (negative counts
// from the end) of a row-major destination of `destination_dims`, elements of
// `element_bytes`, over `route`. Empty where the block does not fit the slot (another
// rank, another extent besides `dim`, an offset out of range): the backend declines and
// the update reports the offset.
std::optional<ShiftSlot> PlanShiftSlot(absl::Span<const int64_t> destination_dims,
                                       absl::Span<const int64_t> block_dims, int64_t dim,
                                       int64_t offset, int64_t element_bytes, comm::Route route);

// A ring's carried block that lives in its slot of the gathered value
// (runtime/in_place.h: CarriedBlockInSlot) is sent from there and received into the next
// slot as one contiguous range on every route: where the block of `size` along `dim`
// of a gathered value of `gathered_dims` is contiguous (a row block of a matrix, a range
// whose every dimension before `dim` is 1). A strided block (a column block, a sequence
// block of several heads) would need a strided send, which NCCL and the IPC path lack:
// the backend then keeps the block in a buffer of its own, copied by the update.
bool CarriedBlockContiguous(absl::Span<const int64_t> gathered_dims, int64_t dim, int64_t size);

// Where the contiguous block at `offset` along `dim` with extent `size` of a row-major
// tensor of `dims` begins, in bytes of `element_bytes` from the tensor's start: the send
// pointer of a carried block in its slot. Empty where the block is strided or does not
// fit.
std::optional<int64_t> ContiguousBlockByteOffset(absl::Span<const int64_t> dims, int64_t dim,
                                                 int64_t offset, int64_t size,
                                                 int64_t element_bytes);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_SHIFT_SLOT_H_
