// What a backend must provide to run CommIR programs: the interpreter (interpreter.h)
// owns control flow, index arithmetic, device coordinates, value lifetimes and the
// grouping of devices for collectives; a backend only carries out tensor ops and
// collectives. This is the seam between the shared interpretation of spmd programs and
// the cpu and cuda backends.
//
// Values may be host tensors (the cpu backend) or device-resident tensors (the cuda
// backend, Tensor::OnDevice): the interpreter hands inputs to ToDevice once, passes
// whatever the backend returns from op to op, and asks ToHost for the results. Number
// literals always arrive as host rank-0 tensors.
#ifndef COMMIR_RUNTIME_BACKEND_H_
#define COMMIR_RUNTIME_BACKEND_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "runtime/in_place.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// A matmul or attention operand that is a block of a larger tensor, read where it lies:
// the result of the slice `slice` (a dynamic_slice or a static slice along one
// dimension; in_place.h: SliceReadInPlace) taken from `base` at `offset` along `dim`,
// or a ring's carried block in its slot of the gathered value `base` (in_place.h:
// CarriedBlockInSlot; `slice` is then the ring's dynamic_update_slice, no slice).
// The interpreter has checked that the block fits (SliceAsMatrices), so `block` is where
// it lies in `base`.
struct SlicedOperand {
  const Tensor* base = nullptr;
  const Operation* slice = nullptr;
  int64_t dim = 0;  // normalised
  int64_t offset = 0;
  absl::Span<const int64_t> shape;  // the block's shape: the slice's result type's dims
  MatrixBlock block;
};

// Where one device's instance of an op runs.
struct OpContext {
  int64_t device = 0;  // mesh device id (0 for a global function)
  // The op's stream on this device: its `stream = N` attribute or the value of its
  // `stream = %v` operand (0 by default).
  int64_t stream = 0;
  // Operand 0 handed over to the op: set only for a dynamic_update_slice that is its
  // destination's last use (in_place.h) when nothing else refers to the destination's
  // buffer (not a caller's argument, not another value, loop, callee or device, not a
  // view sharing its device storage). The backend may write the update into it and move
  // it into its result instead of copying it; tensors[0] points to the same tensor.
  Tensor* donated = nullptr;
  // For an op the backend ReadsSliceInPlaceFor: per tensor operand, the block it
  // reads in place, or null for a whole tensor. tensors[i] is then `base` (not a tensor
  // of the block's shape): only a backend that asked for views gets them.
  absl::Span<const SlicedOperand* const> sliced;
};

// One device group's instance of a collective.
struct CollectiveContext {
  // Every member's mesh device id, in coordinate order.
  std::vector<int64_t> group;
  // The members this process drives, as positions in `group`, ascending: parts[i] and
  // result i belong to group[local[i]]. All of them when one process runs the whole
  // mesh; a backend that spans processes (NCCL) supplies the other members' data.
  std::vector<int64_t> local;
  // streams[i]: the stream the op names on device group[local[i]].
  std::vector<int64_t> streams;
  // For RunShiftInto of a ring's shift whose carried block lives in its slot (in_place.h:
  // CarriedBlockInSlot): per part, the block it sends where it lies in its slot (parts[i]
  // is then the gathered value, `base`), or null for a whole tensor (the loop's own first
  // block). Empty for any other collective.
  absl::Span<const SlicedOperand* const> sliced;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::string_view name() const = 0;

  // Runs a non-collective tensor op on one device. `tensors` are the op's tensor
  // operands in order (number literals arrive as rank-0 host tensors); `indices` are
  // the values of its index operands in order (dynamic slice offsets, attention q_pos
  // and k_pos). Returns the op's results.
  virtual absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op,
                                                    const OpContext& context,
                                                    absl::Span<const Tensor* const> tensors,
                                                    absl::Span<const int64_t> indices) = 0;

  // Makes the result of `full` without filling it: every element is written before any
  // read (in_place.h: FillOverwrittenBeforeRead), so its value never shows, and
  // TransformerEngine allocates such buffers without a fill. The default runs the op.
  virtual absl::StatusOr<std::vector<Tensor>> AllocateUnfilled(const Operation& full,
                                                               const OpContext& context) {
    return RunOp(full, context, {}, {});
  }

  // Runs `matmul` with its product written straight into `destination`, the handed-over
  // destination (see OpContext::donated) of the dynamic_update_slice `update` that is its
  // only use (in_place.h: MatmulWritesInto), at `offset` along update's dimension: no
  // block tensor and no copy of the destination. Returns false to decline (then the
  // destination must be unchanged and the two ops run one by one), e.g. for an offset
  // out of range, which the update then reports. The default declines.
  virtual absl::StatusOr<bool> RunMatmulInto(const Operation& /*matmul*/,
                                             const OpContext& /*context*/,
                                             absl::Span<const Tensor* const> /*tensors*/,
                                             const Operation& /*update*/, int64_t /*offset*/,
                                             Tensor& /*destination*/) {
    return false;
  }

  // Whether matmuls take their dynamic_slice operands as views (OpContext::sliced) in
  // RunOp and RunMatmulInto. If not, the interpreter runs every slice as an op.
  virtual bool ReadsSlicesInPlace() const { return false; }
  // Whether `reader` (a user of a slice that SliceReadInPlace) takes that block as a view.
  // The interpreter keeps a slice as a view only where every reader does, so a backend
  // that copies the block for some reader runs the slice once, as before. By default the
  // matmuls of a backend that ReadsSlicesInPlace.
  virtual bool ReadsSliceInPlaceFor(const Operation& reader) const {
    return ReadsSlicesInPlace() && reader.Is(OpKind::kMatmul);
  }

  // Runs a collective for one device group: parts[i] is the operand of the local member
  // group[local[i]]; returns each local member's result in the same order.
  virtual absl::StatusOr<std::vector<Tensor>> RunCollective(
      const Operation& op, const CollectiveContext& context,
      absl::Span<const Tensor* const> parts) = 0;

  // Runs `shift` for one device group with each local member's block received straight
  // into its slot of `destinations[i]`, the handed-over destination (see
  // OpContext::donated) of the dynamic_update_slice `update` that is the shift's only use
  // (in_place.h: ShiftReceivesInto), at `offsets[i]` along update's dimension: no block
  // tensor and no copy into the destination. parts[i], offsets[i] and destinations[i]
  // belong to group[local[i]]. Returns false to decline (then every destination must be
  // unchanged and the two ops run one by one), e.g. for an offset out of range, which
  // the update then reports. The default declines.
  virtual absl::StatusOr<bool> RunShiftInto(const Operation& /*shift*/,
                                            const CollectiveContext& /*context*/,
                                            absl::Span<const Tensor* const> /*parts*/,
                                            const Operation& /*update*/,
                                            absl::Span<const int64_t> /*offsets*/,
                                            absl::Span<Tensor* const> /*destinations*/) {
    return false;
  }

  // Whether the backend runs `ring` with its carried block in its slot (in_place.h:
  // CarriedBlockInSlot): RunShiftInto with parts that are views (CollectiveContext::sliced)
  // into the ring's update's slots, never declining one whose part is a view. The readers
  // are asked apart (ReadsSliceInPlaceFor). The default does not.
  virtual bool ReceivesCarriedBlockInSlot(const CarriedRing& /*ring*/) const { return false; }

  // Whether values live in device memory. If so the interpreter moves inputs in with
  // ToDevice and results out with ToHost; otherwise it uses host tensors directly.
  virtual bool uses_device_memory() const { return false; }
  // Makes a host input resident on `device`.
  virtual absl::StatusOr<Tensor> ToDevice(int64_t /*device*/, const Tensor& host) {
    return host;
  }
  // A host copy of a value. Waits for the value's producer: the one place where the
  // host waits for a device.
  virtual absl::StatusOr<Tensor> ToHost(const Tensor& value) { return value; }

  // Loops, for a backend that can account for iterations without running them (the sim
  // backend repeats a loop's iterations in closed form once they repeat). EnterLoop
  // comes before a loop's first iteration and ExitLoop after its last (also when the
  // loop fails). Before each iteration, SkipIterations returns how many of the
  // `remaining` iterations (this one included) it has accounted for: the interpreter
  // runs none of those and hands the carried values on as they are. `carried` holds
  // each local device's carried values in turn, null for an index. An error fails the
  // loop.
  virtual void EnterLoop(const Operation& /*loop*/, uint64_t /*trips*/) {}
  virtual absl::StatusOr<uint64_t> SkipIterations(const Operation& /*loop*/,
                                                  uint64_t /*remaining*/,
                                                  absl::Span<const Tensor* const> /*carried*/) {
    return 0;
  }
  virtual void ExitLoop(const Operation& /*loop*/) {}
};

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_BACKEND_H_
