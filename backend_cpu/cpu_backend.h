// The cpu backend: carries out each CommIR op with the reference kernels (kernels.h,
// OpenBLAS for GEMMs), dispatched by op kind through kernel_table.h, and collectives with exact in-process semantics (collectives.h).
#ifndef COMMIR_BACKEND_CPU_CPU_BACKEND_H_
#define COMMIR_BACKEND_CPU_CPU_BACKEND_H_

#include "runtime/backend.h"

namespace commir::cpu {

class CpuBackend : public runtime::Backend {
 public:
  // Checks the kernel tables (kernel_table.h) and aborts naming any op without a kernel.
  CpuBackend();

  absl::string_view name() const override { return "cpu"; }
  // Host tensors run on the host whatever the device and stream: the context is unused,
  // and a collective always receives every member's part (one process runs the mesh).
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, const runtime::OpContext& context,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices) override;
  absl::StatusOr<std::vector<runtime::Tensor>> RunCollective(
      const Operation& op, const runtime::CollectiveContext& context,
      absl::Span<const runtime::Tensor* const> parts) override;
  // A `full` overwritten before any read (runtime/in_place.h: FillOverwrittenBeforeRead):
  // the host allocation only, no fill kernel (runtime::Tensor's storage comes
  // value-initialised from the allocator).
  absl::StatusOr<std::vector<runtime::Tensor>> AllocateUnfilled(
      const Operation& full, const runtime::OpContext& context) override;
  // Matmuls read f32 and f64 dynamic_slice blocks where they lie (an offset pointer and
  // the sliced tensor's row stride); other types are sliced first, as before.
  bool ReadsSlicesInPlace() const override { return true; }
  // Attention reads its q, k and v blocks where they lie too: each (batch, head) matrix
  // of a block from its offset with the sliced tensor's strides (Attention on
  // MatrixOperands), bit for bit what it computes on the sliced tensors.
  bool ReadsSliceInPlaceFor(const Operation& reader) const override {
    return ReadsSlicesInPlace() && (reader.Is(OpKind::kMatmul) || reader.Is(OpKind::kAttention));
  }
  // A handed-over dynamic_update_slice destination is written in place, and a matmul
  // into such a destination is one BLAS call with an offset output pointer and the
  // destination's row length as its row stride (f32 and f64 operands of the
  // destination's type; others decline and run as two ops).
  absl::StatusOr<bool> RunMatmulInto(const Operation& matmul, const runtime::OpContext& context,
                                     absl::Span<const runtime::Tensor* const> tensors,
                                     const Operation& update, int64_t offset,
                                     runtime::Tensor& destination) override;

  // A shift into a handed-over update destination copies each source member's part
  // straight into the receiver's slot (shift_into.h): one copy of the block's bytes.
  absl::StatusOr<bool> RunShiftInto(const Operation& shift,
                                    const runtime::CollectiveContext& context,
                                    absl::Span<const runtime::Tensor* const> parts,
                                    const Operation& update, absl::Span<const int64_t> offsets,
                                    absl::Span<runtime::Tensor* const> destinations) override;
  // A ring's carried block lives in its slot (runtime/in_place.h: CarriedBlockInSlot): the
  // shift copies it from there into the next member's slot (ShiftInto), and matmuls and
  // attention read it there.
  bool ReceivesCarriedBlockInSlot(const runtime::CarriedRing& /*ring*/) const override {
    return true;
  }
  // The same without a context, for tests and benchmarks.
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices);
  absl::StatusOr<std::vector<runtime::Tensor>> RunCollective(
      const Operation& op, absl::Span<const runtime::Tensor* const> parts);
};

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_CPU_BACKEND_H_
