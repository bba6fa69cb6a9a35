// The interpreter's part in a ring whose carried block lives in its slot of the gathered
// value (in_place.h: CarriedBlockInSlot): planning each loop's slots, receiving each step's
// block into its slot, and passing the gathered value on at the ring's updates.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/interpreter.h"

namespace commir::runtime {
namespace {

// The most steps a ring's slots are planned for (one int64 each, per device): a longer
// loop runs as written. Rings take one step per device of their axis.
constexpr uint64_t kMaxPlannedSteps = uint64_t{1} << 16;

// Where a tensor's bytes lie: its host bytes or its device storage. The same for a tensor
// and what it is moved into.
const void* StorageOf(const Tensor& tensor) {
  return tensor.on_device() ? static_cast<const void*>(tensor.device_storage())
                            : tensor.raw_data();
}

}  // namespace

void Interpreter::AddCarriedRing(const Operation& op) {
  std::optional<CarriedRing> ring = CarriedBlockInSlot(op);
  if (!ring.has_value() || !backend_.ReceivesCarriedBlockInSlot(*ring)) return;
  const Value* block = ring->shift->operand(0);
  const Value* last_block = ring->loop->result(ring->block);
  for (const Value* value : {block, last_block}) {
    for (const Operation* user : value->users()) {
      if (user == ring->shift || user == ring->update || user == ring->last_update) continue;
      if (!backend_.ReadsSliceInPlaceFor(*user)) return;
    }
  }
  const Type gathered = ring->update->operand(0)->type();
  int64_t dim = ring->update->attrs().GetInt("dim", 0);
  if (dim < 0) dim += gathered.rank();
  const size_t index = carried_rings_.size();
  carried_rings_.push_back(*ring);
  carried_extents_.push_back(SliceExtent{dim, block->type().dims()[dim], std::nullopt});
  carried_runs_.emplace_back();
  carried_by_op_[ring->shift] = index;
  carried_by_op_[ring->update] = index;
  carried_by_op_[ring->last_update] = index;
  carried_by_loop_[ring->loop].push_back(index);
}

absl::StatusOr<int64_t> Interpreter::IndexAhead(const Value* value, const Operation& loop,
                                                int64_t iv, int64_t device,
                                                const Env& env) const {
  if (value->is_literal()) return static_cast<int64_t>(value->literal_value());
  if (value->kind() == Value::Kind::kBlockArgument && value->owner_block() == loop.region(0)) {
    return iv;  // the induction variable (CarriedBlockInSlot allows no other)
  }
  const Operation* def = value->defining_op();
  // Index arithmetic in the body or after the loop is worked out here; what comes
  // before the loop is in the environment already.
  const bool ahead = def != nullptr && (def->parent_block() == loop.region(0) ||
                                        (def->parent_block() == loop.parent_block() &&
                                         loop.IsBeforeInBlock(def)));
  if (!ahead) {
    auto it = env[device].find(value);
    if (it == env[device].end()) {
      return absl::InternalError(absl::StrFormat("%%%s is not known before the loop", value->name()));
    }
    return it->second.index;
  }
  int64_t a = 0, b = 0;
  if (def->num_operands() == 2) {
    absl::StatusOr<int64_t> left = IndexAhead(def->operand(0), loop, iv, device, env);
    if (!left.ok()) return left.status();
    absl::StatusOr<int64_t> right = IndexAhead(def->operand(1), loop, iv, device, env);
    if (!right.ok()) return right.status();
    a = *left;
    b = *right;
  }
  return IndexOpValue(*def, device, a, b);
}

void Interpreter::PlanCarriedRings(const Operation& loop,
                                   const std::vector<std::vector<Slot>>& carried, int64_t lower,
                                   int64_t step, uint64_t trips, const Env& env) {
  auto rings = carried_by_loop_.find(&loop);
  if (rings == carried_by_loop_.end()) return;
  for (size_t r : rings->second) {
    const CarriedRing& ring = carried_rings_[r];
    const SliceExtent& extent = carried_extents_[r];
    CarriedRun& run = carried_runs_[r];
    run.active.assign(num_devices_, false);
    run.slots.assign(num_devices_, {});
    run.trip = 0;
    if (trips == 0 || trips > kMaxPlannedSteps) continue;
    bool all = true;
    for (int64_t d : local_) {
      const Slot& gathered = carried[d][ring.gathered];
      const Slot& block = carried[d][ring.block];
      // The gathered value's buffer is the loop's alone (its init moved in), so the
      // views the shifts make are its only other holders.
      all = gathered.tensor != nullptr && gathered.slice == nullptr &&
            gathered.tensor.use_count() == 1 &&
            (!gathered.tensor->on_device() || gathered.tensor->shared_storage().use_count() == 1) &&
            block.tensor != nullptr && block.slice == nullptr && block.tensor != gathered.tensor;
      // The updates' offsets, step by step: off[0] where the first step's update writes
      // the loop's init block, off[t] (t >= 1) the slot step t - 1's shift receives into
      // and step t's update (or, for the last, the one after the loop) finds it in. The
      // writes then come in the program's order but for the first two, and the block a
      // step sends and reads is not overwritten by its own shift: so every two
      // consecutive slots must lie apart.
      std::vector<int64_t>& slots = run.slots[d];
      int64_t previous = 0;
      for (uint64_t t = 0; all && t <= trips; ++t) {
        // lower + t * step, for t < trips, is an iteration's induction variable.
        const int64_t iv = static_cast<int64_t>(static_cast<uint64_t>(lower) +
                                                t * static_cast<uint64_t>(step));
        absl::StatusOr<int64_t> offset =
            t < trips ? IndexAhead(ring.update->operand(2), loop, iv, d, env)
                      : IndexAhead(ring.last_update->operand(2), loop, 0, d, env);
        all = offset.ok() &&
              SliceAsMatrices(gathered.tensor->shape(), extent.dim, *offset, extent.size)
                  .has_value() &&
              (t == 0 || *offset >= previous + extent.size || previous >= *offset + extent.size);
        if (!all) break;
        if (t > 0) slots.push_back(*offset);
        previous = *offset;
      }
      if (!all) break;
    }
    if (!all) {
      run.slots.assign(num_devices_, {});
      continue;
    }
    for (int64_t d : local_) run.active[d] = true;
  }
}

absl::StatusOr<bool> Interpreter::ReceiveCarried(const Operation& op,
                                                 const CollectiveContext& context, Env& env) {
  const size_t r = carried_by_op_.at(&op);
  const CarriedRing& ring = carried_rings_[r];
  const SliceExtent& extent = carried_extents_[r];
  const CarriedRun& run = carried_runs_[r];
  for (int64_t position : context.local) {
    const int64_t member = context.group[position];
    if (member >= static_cast<int64_t>(run.active.size()) || !run.active[member] ||
        run.trip >= run.slots[member].size()) {
      // Run as a collective, which sends whole tensors: no block may be a view then.
      for (int64_t other : context.local) {
        if (Lookup(env, context.group[other], ring.shift->operand(0)).slice != nullptr) {
          return absl::InternalError("a ring's block is a view where the ring runs as written");
        }
      }
      return false;
    }
  }
  const size_t members = context.local.size();
  std::vector<std::shared_ptr<const Tensor>> gathered(members);
  std::vector<const Tensor*> parts(members);
  std::vector<Tensor*> destinations(members);
  std::vector<int64_t> offsets(members);
  std::vector<SlicedOperand> views(members);
  std::vector<const SlicedOperand*> sliced(members, nullptr);
  bool any_view = false;
  const Value* block_value = ring.shift->operand(0);
  for (size_t i = 0; i < members; ++i) {
    const int64_t member = context.group[context.local[i]];
    const Slot block = Lookup(env, member, block_value);
    gathered[i] = Lookup(env, member, ring.update->operand(0)).tensor;
    destinations[i] = const_cast<Tensor*>(gathered[i].get());
    offsets[i] = run.slots[member][run.trip];
    parts[i] = block.tensor.get();
    if (block.slice != ring.update) continue;
    // The block this step sends lies in its slot: the previous step received it there.
    const std::optional<MatrixBlock> place =
        block.tensor == gathered[i]
            ? SliceAsMatrices(gathered[i]->shape(), extent.dim, block.index, extent.size)
            : std::nullopt;
    if (!place.has_value()) {
      return absl::InternalError("the ring's carried block is not in its slot");
    }
    views[i] = SlicedOperand{gathered[i].get(), ring.update, extent.dim, block.index,
                             block_value->type().dims(), *place};
    sliced[i] = &views[i];
    any_view = true;
  }
  // Set for every step, with nulls for the loop's own block: the backend knows the
  // shift as the ring's (a slot's receive is what the next step's readers wait for).
  CollectiveContext with_views = context;
  with_views.sliced = sliced;
  absl::StatusOr<bool> received =
      backend_.RunShiftInto(op, with_views, parts, *ring.update, offsets, destinations);
  if (!received.ok()) return received.status();
  if (!*received) {
    if (!any_view) return false;  // the first step: the shift runs as a collective
    return absl::InternalError(
        "the backend declined to send a ring's carried block from its slot");
  }
  for (size_t i = 0; i < members; ++i) {
    Slot view{std::move(gathered[i]), offsets[i]};
    view.slice = ring.update;
    env[context.group[context.local[i]]][op.result(0)] = std::move(view);
  }
  return true;
}

absl::StatusOr<bool> Interpreter::UpdateCarried(const Operation& op, int64_t device, Env& env) {
  const size_t r = carried_by_op_.at(&op);
  const CarriedRing& ring = carried_rings_[r];
  const CarriedRun& run = carried_runs_[r];
  const Slot block = Lookup(env, device, op.operand(1));
  Slot gathered = Lookup(env, device, op.operand(0));
  const int64_t offset = Lookup(env, device, op.operand(2)).index;
  if (block.slice == ring.update) {
    // Received here by the step before: nothing to write.
    if (block.tensor != gathered.tensor || block.index != offset) {
      return absl::InternalError(absl::StrFormat(
          "the ring's carried block lies at %d, not at this update's offset %d", block.index,
          offset));
    }
    env[device][op.result(0)] = Slot{std::move(gathered.tensor), 0};
    return true;
  }
  if (&op != ring.update || device >= static_cast<int64_t>(run.active.size()) ||
      !run.active[device]) {
    return false;
  }
  // The first step's block (the loop's init) is written into the gathered value in place:
  // its buffer stays the one the shift's view of the next slot refers to.
  Tensor& destination = const_cast<Tensor&>(*gathered.tensor);
  const void* storage = StorageOf(destination);
  OpContext context{device, StreamOf(op, env, device)};
  context.donated = &destination;
  const Tensor* tensors[] = {gathered.tensor.get(), block.tensor.get()};
  absl::StatusOr<std::vector<Tensor>> results =
      backend_.RunOp(op, context, tensors, absl::MakeConstSpan(&offset, 1));
  if (!results.ok()) return results.status();
  if (results->size() != 1 || StorageOf((*results)[0]) != storage) {
    return absl::InternalError("the backend did not write the ring's first block in place");
  }
  destination = std::move((*results)[0]);
  env[device][op.result(0)] = Slot{std::move(gathered.tensor), 0};
  return true;
}

}  // namespace commir::runtime
