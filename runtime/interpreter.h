// The shared interpretation of CommIR functions: every device of the mesh runs the
// function in lockstep (programs are SPMD and loop bounds are static, so all devices
// take the same path), ops run in program order, which respects every data dependency
// whatever `stream` they name, and collectives combine the group members' operands.
// A global function runs on one device with whole tensors: that is the reference.
//
// A process may drive only some of the mesh's devices (one process per GPU under
// torchrun or Slurm): set_local_devices restricts execution to those, and collectives
// then hand the backend only the local members' parts (see CollectiveContext). Ops are
// issued in program order; a backend with streams (cuda) makes them asynchronous and
// keeps the data dependencies with events.
#ifndef COMMIR_RUNTIME_INTERPRETER_H_
#define COMMIR_RUNTIME_INTERPRETER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/backend.h"
#include "runtime/in_place.h"
#include "commir/liveness.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// Per-op timing hook (for traces); called after each op with the device, the op and
// its start/end in microseconds since the run started.
struct OpEvent {
  int64_t device = 0;
  const Operation* op = nullptr;
  double start_us = 0;
  double end_us = 0;
  // The stream the op was issued on by this device: its `stream = N` attribute or the
  // value of its `stream = %v` operand on this device (0 by default).
  int64_t stream = 0;
};

class Interpreter {
 public:
  // The most devices one interpreter runs: past this even the per-device tables would
  // not fit (a mesh of a billion devices is a typo, not a program to simulate). Run
  // refuses such a mesh without allocating them.
  static constexpr int64_t kMaxDevices = int64_t{1} << 24;

  Interpreter(const Function& function, Backend& backend);

  // Devices the function runs on: the mesh's devices for a spmd function, 1 for a
  // global function.
  int64_t num_devices() const { return num_devices_; }

  // Runs only these mesh devices (ascending, each < num_devices()); default: all.
  absl::Status set_local_devices(std::vector<int64_t> devices);
  const std::vector<int64_t>& local_devices() const { return local_; }

  // inputs[d][i] is device d's local part of argument i (host tensors; inputs[d] may be
  // empty for a device that is not local). Returns outputs[d][r], host tensors, with
  // outputs[d] empty for devices that are not local.
  absl::StatusOr<std::vector<std::vector<Tensor>>> Run(
      const std::vector<std::vector<Tensor>>& inputs);

  // Where the last failure happened (unknown if not at an op).
  Location error_location() const { return error_location_; }

  void set_event_sink(std::vector<OpEvent>* events) { events_ = events; }

 private:
  struct Slot {
    std::shared_ptr<const Tensor> tensor;
    int64_t index = 0;
    // A matmul's (or a shift's) result that the backend wrote into its update's
    // destination (in_place.h: MatmulWritesInto, ShiftReceivesInto):
    // `tensor` is that destination, already holding the block; the update just passes it on.
    bool written_into_destination = false;
    // A dynamic_slice that a matmul reads in place (in_place.h: SliceReadInPlace) and
    // that did not run: `tensor` is the sliced tensor and `index` the block's offset.
    // Or a ring's carried block received into its slot (in_place.h: CarriedBlockInSlot):
    // `slice` is the ring's update in the loop body, `tensor` the gathered value and
    // `index` the slot's offset.
    const Operation* slice = nullptr;
  };
  using Env = std::vector<absl::flat_hash_map<const Value*, Slot>>;

  absl::Status CheckDeviceCount() const;
  // Refuses a function whose calls expand to more than kMaxExpandedOps executed ops
  // (call_graph.h), before it runs: calls that fan out run their callees once per
  // call, and a function that calls the next twice, forty deep, would run 2^40 ops
  // (and the sim record an event for each). Checked once per interpreter.
  absl::Status CheckCallExpansion();
  absl::Status RunBlock(const Block& block, Env& env);
  absl::Status RunOp(const Operation& op, Env& env);
  absl::Status RunFor(const Operation& op, Env& env);
  // Runs the callee's body on the same devices, with the call's operands as its
  // arguments (an interpreter per callee, made once, keeps the callee's liveness).
  absl::Status RunCall(const Operation& op, Env& env);
  absl::Status RunIndexOp(const Operation& op, Env& env);
  absl::Status RunCollective(const Operation& op, Env& env);
  absl::Status RunTensorOp(const Operation& op, Env& env);
  // For a shift that ShiftReceivesInto an update: hands the backend every local group
  // member's destination of that update and the block's offset, and marks the results as
  // written into them. False, with the environment unchanged, where a destination is
  // not free to take or the backend declines: the shift then runs as a collective.
  absl::StatusOr<bool> ReceiveInPlace(const Operation& op, const CollectiveContext& context,
                                      absl::Span<const Tensor* const> parts, Env& env);
  // Before a loop's first iteration, for each of its rings whose carried block lives in
  // its slot (in_place.h: CarriedBlockInSlot): every slot each step's shift receives
  // into, worked out from the updates' offsets, and whether the ring runs so on every
  // local device: the gathered value's buffer is the loop's alone, every slot fits, and
  // each step's slot is apart from the one the block it sends lies in. Otherwise the
  // ring runs as written (the block received apart and copied).
  // Records `op`'s ring when it is a shift whose carried block lives in its slot
  // (CarriedBlockInSlot) and the backend runs it so, with every reader taking the view.
  void AddCarriedRing(const Operation& op);
  void PlanCarriedRings(const Operation& loop, const std::vector<std::vector<Slot>>& carried,
                        int64_t lower, int64_t step, uint64_t trips, const Env& env);
  // The value of `value`, an index the ring's offsets are made of (in_place.h:
  // CarriedBlockInSlot), on `device` in the iteration whose induction variable is `iv`.
  absl::StatusOr<int64_t> IndexAhead(const Value* value, const Operation& loop, int64_t iv,
                                     int64_t device, const Env& env) const;
  // An index op's value from its operands' (a, b; unused for rank and full) on `device`.
  absl::StatusOr<int64_t> IndexOpValue(const Operation& op, int64_t device, int64_t a,
                                       int64_t b) const;
  // For a shift of an active carried ring: receives every local member's next block into
  // its slot of the gathered value and makes the results views of it. False where the
  // backend declines a block that is no view (the shift then runs as a collective).
  absl::StatusOr<bool> ReceiveCarried(const Operation& op, const CollectiveContext& context,
                                      Env& env);
  // For an update of a carried ring (the one in the body, or after the loop): passes the
  // gathered value on where the block is already in its slot, or writes the block into
  // it in place, keeping the buffer the views refer to. False where the ring is not
  // active on `device`: the update runs as an op.
  absl::StatusOr<bool> UpdateCarried(const Operation& op, int64_t device, Env& env);
  // Runs a slice that was kept as a view (Slot::slice), for a user that needs the block
  // as a tensor of its own.
  absl::StatusOr<Slot> Materialize(const Slot& view, int64_t device, Env& env);
  Slot Lookup(const Env& env, int64_t device, const Value* value) const;
  // Moves `value`'s tensor out of `device`'s environment when that is the only reference
  // to it anywhere: not a caller's argument (held without ownership), not shared with
  // another value, a loop's carried values, a callee or another device, and for a device
  // tensor not a view of shared storage. Returns null, with the environment unchanged,
  // otherwise. The caller may then modify the tensor: the interpreter makes every tensor
  // it owns as a non-const object (make_shared<Tensor>).
  std::shared_ptr<const Tensor> TakeIfUnique(Env& env, int64_t device, const Value* value) const;
  // Drops every local device's reference to `values` (see Liveness).
  void Release(absl::Span<const Value* const> values, Env& env) const;
  int64_t StreamOf(const Operation& op, const Env& env, int64_t device) const;
  absl::Status Fail(const Operation& op, int64_t device, absl::string_view message);
  absl::Status Fail(const Operation& op, int64_t device, const absl::Status& status);

  const Function& function_;
  Backend& backend_;
  // Where each value dies, computed once: a value is released after its last use.
  Liveness liveness_;
  // Ops that may reuse a buffer (in_place.h), found once: dynamic_update_slice ops that
  // are their destination's last use, matmuls that write into such an update's
  // destination (mapped to the update), shifts that receive into one, and the init operands a loop may move into its
  // carried values (their last use is the loop and its body does not read them).
  absl::flat_hash_set<const Operation*> updates_in_place_;
  absl::flat_hash_map<const Operation*, const Operation*> matmul_into_;
  // `full` ops whose buffer is overwritten before any read (FillOverwrittenBeforeRead):
  // allocated with Backend::AllocateUnfilled, no fill.
  absl::flat_hash_set<const Operation*> unfilled_;
  // Shifts that receive their block straight into an update's destination
  // (ShiftReceivesInto), mapped to the update.
  absl::flat_hash_map<const Operation*, const Operation*> shift_into_;
  absl::flat_hash_map<const Operation*, std::vector<bool>> moved_inits_;
  // Slice ops whose readers read the block in place (the backend takes it for every
  // reader), with the block each takes: worked out once, here, not per run.
  absl::flat_hash_map<const Operation*, SliceExtent> slices_in_place_;
  // Rings whose carried block lives in its slot (CarriedBlockInSlot, every reader taking
  // the view and the backend receiving into the slot), found once, and for each the
  // block's extent in the gathered value; the shift, the updates and the loop map to
  // their ring's position. While a loop runs, each ring's plan (PlanCarriedRings) and
  // the step under way.
  struct CarriedRun {
    std::vector<bool> active;                // per device
    std::vector<std::vector<int64_t>> slots;  // per device, per step: where the shift receives
    uint64_t trip = 0;
  };
  std::vector<CarriedRing> carried_rings_;
  std::vector<SliceExtent> carried_extents_;
  std::vector<CarriedRun> carried_runs_;
  absl::flat_hash_map<const Operation*, size_t> carried_by_op_;
  absl::flat_hash_map<const Operation*, std::vector<size_t>> carried_by_loop_;
  const Mesh* mesh_;
  int64_t num_devices_;
  std::vector<int64_t> local_;
  std::vector<bool> is_local_;
  Location error_location_;
  std::vector<OpEvent>* events_ = nullptr;
  double start_time_us_ = 0;
  // How deeply calls nest here: the verifier rejects recursion, and this bound turns an
  // unverified recursive program into an error rather than a stack overflow.
  static constexpr int kMaxCallDepth = 256;
  int call_depth_ = 0;
  bool calls_checked_ = false;
  absl::flat_hash_map<const Function*, std::unique_ptr<Interpreter>> callees_;
};

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_INTERPRETER_H_
