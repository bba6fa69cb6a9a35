#include "sim/gemm_views.h"

#include "runtime/in_place.h"

namespace commir::sim {

// The rules are runtime/in_place.h's, which the interpreter also follows when it hands
// the backends their blocks: what is priced as free is what the backends run without a
// copy (a ring's block lands in its slot where ShiftReceivesInto or CarriedBlockInSlot
// holds; elsewhere, and for a strided carried block on the cuda backend, it is still
// copied: docs/commir-run-sim.md).
bool IsGemmBlockInPlace(const Operation& op) {
  if (op.Is(OpKind::kDynamicSlice) || op.Is(OpKind::kSlice)) return runtime::SliceReadInPlace(op);
  if (!op.Is(OpKind::kDynamicUpdateSlice)) return false;
  // A GEMM's block: only where the backends store it in place (the destination dies
  // here), so what is priced is what runs.
  if (runtime::UpdateWrittenByMatmul(op) != nullptr) return true;
  // A received block written into the gathered buffer: the transfer lands there.
  return runtime::RingBlockLandsInPlace(op);
}

}  // namespace commir::sim
