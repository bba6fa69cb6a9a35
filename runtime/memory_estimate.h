// How much memory a run needs, known before it starts: the peak of the bytes of the
// tensors that are live at once (the values the interpreter holds, see liveness.h),
// and the machine's physical memory to compare it with. commir-run refuses a program
// that cannot fit up front instead of dying of std::bad_alloc partway through.
#ifndef COMMIR_RUNTIME_MEMORY_ESTIMATE_H_
#define COMMIR_RUNTIME_MEMORY_ESTIMATE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "commir/ir.h"
#include "commir/type.h"

namespace commir::runtime {

// Bytes of one value of `type` (0 for an index), saturated at the largest uint64.
uint64_t TypeBytes(Type type);
// Sum of TypeBytes over `types`, saturated.
uint64_t TotalBytes(absl::Span<const Type> types);

// Sums and products that stick at the largest uint64 instead of wrapping.
uint64_t SaturatingAdd(uint64_t a, uint64_t b);
uint64_t SaturatingMul(uint64_t a, uint64_t b);

// The most bytes of tensors one device holds at any point of a run of `function`: its
// arguments, then each op's results while its operands are still held, with every value
// released after its last use. A slice read in place (in_place.h: SliceReadInPlace,
// which the interpreter runs as a view of the sliced tensor) costs nothing itself and
// keeps the sliced tensor alive until its last reader has run; so is a ring's carried
// block that lives in its slot of the gathered value (in_place.h: CarriedBlockInSlot),
// which keeps the gathered value alive. A loop adds its body's
// peak and its carried values to what is live around it, and a call its callee's peak
// beyond the call's operands. Saturated at the largest uint64.
uint64_t PeakLiveBytesPerDevice(const Function& function);

// Physical memory of this machine in bytes (0 if unknown).
uint64_t PhysicalMemoryBytes();

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_MEMORY_ESTIMATE_H_
