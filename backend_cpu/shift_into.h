// A shift whose received blocks land straight in their slots of the destinations
// (runtime/in_place.h: ShiftReceivesInto): each member's block is copied from its
// source member's part into the slot once, with no block tensor in between and no copy
// into the destination afterwards.
#ifndef COMMIR_BACKEND_CPU_SHIFT_INTO_H_
#define COMMIR_BACKEND_CPU_SHIFT_INTO_H_

#include <cstdint>

#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// Member c of the group (parts and destinations in coordinate order, one per member)
// receives the part of member (c - offset) mod n into destinations[c] at offsets[c] along
// `dim` (negative counts from the end): dynamic_update_slice(destinations[c], shifted
// part, offsets[c]). Returns false, with every destination unchanged, where any member's
// block does not fit its slot (another element type or rank, another extent besides
// `dim`, an offset out of range): the shift and the update then run one by one, and the
// update reports the offset.
//
// A ring's carried block is sent from where it lies (runtime/in_place.h:
// CarriedBlockInSlot): where sliced[c] is set, member c's part is that block of parts[c]
// (the gathered value) along `dim`, read in place. It must lie apart from every slot
// written into the same tensor (the interpreter plans the slots so).
bool ShiftInto(absl::Span<const runtime::Tensor* const> parts, int64_t offset, int64_t dim,
               absl::Span<const int64_t> offsets, absl::Span<runtime::Tensor* const> destinations,
               absl::Span<const runtime::SlicedOperand* const> sliced = {});

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_SHIFT_INTO_H_
