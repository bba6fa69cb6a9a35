// The cpu backend, counting what the interpreter asks it to move, for the tests of blocks
// received in place (shift_into_test, carried_block_test): the update kernels it runs
// (each copies a block into its destination) with their bytes, the shifts it runs as
// collectives (each into a new block tensor), and those it receives into a slot, with
// their bytes and how many of their parts were sent from a slot (a carried block).
#ifndef COMMIR_BACKEND_CPU_MOVE_COUNTING_BACKEND_H_
#define COMMIR_BACKEND_CPU_MOVE_COUNTING_BACKEND_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/ir.h"
#include "runtime/tensor.h"

namespace commir::cpu {

struct MoveCountingOptions {
  bool receive_in_place = true;  // a shift whose only use is the update, into its slot
  bool carried_in_slot = true;   // a ring's carried block, in its slot
};

class MoveCountingBackend : public CpuBackend {
 public:
  explicit MoveCountingBackend(MoveCountingOptions options) : options_(options) {}

  bool ReceivesCarriedBlockInSlot(const runtime::CarriedRing& ring) const override {
    return options_.carried_in_slot && CpuBackend::ReceivesCarriedBlockInSlot(ring);
  }
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, const runtime::OpContext& context,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices) override {
    if (op.Is(OpKind::kDynamicUpdateSlice)) {
      ++update_kernels;
      update_bytes += tensors[1]->byte_size();
    }
    return CpuBackend::RunOp(op, context, tensors, indices);
  }
  absl::StatusOr<std::vector<runtime::Tensor>> RunCollective(
      const Operation& op, const runtime::CollectiveContext& context,
      absl::Span<const runtime::Tensor* const> parts) override {
    if (op.Is(OpKind::kShift)) ++shifts_into_new_blocks;
    return CpuBackend::RunCollective(op, context, parts);
  }
  absl::StatusOr<bool> RunShiftInto(const Operation& shift,
                                    const runtime::CollectiveContext& context,
                                    absl::Span<const runtime::Tensor* const> parts,
                                    const Operation& update, absl::Span<const int64_t> offsets,
                                    absl::Span<runtime::Tensor* const> destinations) override {
    if (!options_.receive_in_place) return false;
    absl::StatusOr<bool> received =
        CpuBackend::RunShiftInto(shift, context, parts, update, offsets, destinations);
    if (received.ok() && *received) {
      ++shifts_into_slots;
      for (const runtime::Tensor* part : parts) received_bytes += part->byte_size();
      for (const runtime::SlicedOperand* view : context.sliced) sent_from_slots += view != nullptr;
    }
    return received;
  }

  int64_t update_kernels = 0, update_bytes = 0;
  int64_t shifts_into_new_blocks = 0, shifts_into_slots = 0, received_bytes = 0;
  int64_t sent_from_slots = 0;

 private:
  MoveCountingOptions options_;
};

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_MOVE_COUNTING_BACKEND_H_
