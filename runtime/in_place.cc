#include "runtime/in_place.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "commir/mesh.h"
#include "commir/scalar_math.h"

namespace commir::runtime {
namespace {

// The op of `block` that is `user` or holds it in a region; null if none does.
const Operation* AncestorIn(const Block* block, const Operation* user) {
  while (user != nullptr && user->parent_block() != block) {
    const Block* parent = user->parent_block();
    user = parent == nullptr ? nullptr : parent->parent_op();
  }
  return user;
}

// Whether `value` is available before `op` runs: defined in an enclosing block (an
// argument or an op outside op's block) or by an op of op's block before it.
bool DefinedBefore(const Value& value, const Operation& op) {
  if (value.is_literal() || value.kind() == Value::Kind::kBlockArgument) return true;
  const Operation* def = value.defining_op();
  if (def == nullptr) return true;
  const Operation* in_block = AncestorIn(op.parent_block(), def);
  if (in_block == nullptr) return true;  // defined outside op's block, which it encloses
  return in_block != &op && in_block->IsBeforeInBlock(&op);
}

// A block of `dims` taken along `dim` (normalised) is one strided matrix layout: a pointer
// offset along the rows or the columns (the last two dimensions) of the whole tensor, or a
// contiguous range when every dimension before `dim` is 1.
bool OneMatrixLayout(absl::Span<const int64_t> dims, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (dim < 0 || dim >= rank || rank < 2) return false;
  if (dim >= rank - 2) return true;
  for (int64_t d = 0; d < dim; ++d) {
    if (dims[d] != 1) return false;
  }
  return true;
}

int64_t NormalizedDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

bool IsShiftResult(const Value* value) {
  return value != nullptr && value->kind() == Value::Kind::kResult &&
         value->defining_op() != nullptr && value->defining_op()->Is(OpKind::kShift);
}

// The block a ring passes on: a shift's result, or a loop-carried value (the loop's body
// argument or result) that each iteration replaces by a shift's result.
bool IsRingBlock(const Value* value) {
  if (IsShiftResult(value)) return true;
  const Operation* loop = nullptr;
  int yielded = -1;
  if (value->kind() == Value::Kind::kResult && value->defining_op() != nullptr &&
      value->defining_op()->Is(OpKind::kFor)) {
    loop = value->defining_op();
    yielded = value->index();
  } else if (value->kind() == Value::Kind::kBlockArgument && value->owner_block() != nullptr &&
             value->owner_block()->parent_op() != nullptr &&
             value->owner_block()->parent_op()->Is(OpKind::kFor)) {
    loop = value->owner_block()->parent_op();
    yielded = value->index() - 1;  // argument 0 is the induction variable
  }
  if (loop == nullptr || yielded < 0 || loop->num_regions() < 1) return false;
  const Operation* yield = loop->region(0)->terminator();
  if (yield == nullptr || yielded >= yield->num_operands()) return false;
  return IsShiftResult(yield->operand(yielded));
}

}  // namespace

std::optional<SliceExtent> SliceAlongOneDim(const Operation& slice) {
  if (slice.num_operands() < 1 || slice.num_results() != 1) return std::nullopt;
  const Type source = slice.operand(0)->type();
  if (!source.is_tensor() || source.rank() < 1) return std::nullopt;
  const int64_t rank = source.rank();
  if (slice.Is(OpKind::kDynamicSlice)) {
    const int64_t dim = NormalizedDim(slice.attrs().GetInt("dim", 0), rank);
    if (dim < 0 || dim >= rank) return std::nullopt;
    return SliceExtent{dim, slice.attrs().GetInt("size", 0), std::nullopt};
  }
  if (!slice.Is(OpKind::kSlice)) return std::nullopt;
  const Attribute* start_attr = slice.attrs().Find("start");
  const Attribute* size_attr = slice.attrs().Find("size");
  if (start_attr == nullptr || size_attr == nullptr) return std::nullopt;
  const std::optional<std::vector<int64_t>> starts = start_attr->int_list();
  const std::optional<std::vector<int64_t>> sizes = size_attr->int_list();
  if (!starts.has_value() || !sizes.has_value() ||
      static_cast<int64_t>(starts->size()) != rank || static_cast<int64_t>(sizes->size()) != rank) {
    return std::nullopt;
  }
  int64_t dim = -1;
  for (int64_t d = 0; d < rank; ++d) {
    if ((*starts)[d] == 0 && (*sizes)[d] == source.dims()[d]) continue;
    if (dim >= 0) return std::nullopt;  // cut along two dimensions
    dim = d;
  }
  if (dim < 0) dim = rank - 1;
  return SliceExtent{dim, (*sizes)[dim], (*starts)[dim]};
}

bool SliceReadInPlace(const Operation& slice) {
  const std::optional<SliceExtent> extent = SliceAlongOneDim(slice);
  if (!extent.has_value()) return false;
  const Value* block = slice.result(0);
  const Value* source = slice.operand(0);
  if (!block->type().is_tensor() || block->use_empty()) return false;
  for (const Operation* user : block->users()) {
    if (ReadsAsMatrices(*user, block)) continue;
    // The sim prices attention_grad's q, k and v as strided too (FlashAttention's backward
    // takes them as its forward does); any other operand (o, lse, dout) is not. Only
    // here: a ring's carried block (CarriedBlockInSlot) is handed as a view to its readers,
    // which attention_grad's kernels do not take.
    if (!user->Is(OpKind::kAttentionGrad)) return false;
    for (int i = 3; i < user->num_operands(); ++i) {
      if (user->operand(i) == block) return false;
    }
  }
  return OneMatrixLayout(source->type().dims(), extent->dim);
}

bool ReadsAsMatrices(const Operation& reader, const Value* block) {
  if (reader.Is(OpKind::kMatmul)) return true;
  if (!reader.Is(OpKind::kAttention)) return false;
  // q, k and v are strided; any other operand (none is a tensor today) is not.
  for (int i = 3; i < reader.num_operands(); ++i) {
    if (reader.operand(i) == block) return false;
  }
  return true;
}

std::optional<MatrixBlock> SliceAsMatrices(absl::Span<const int64_t> dims, int64_t dim,
                                           int64_t offset, int64_t size) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  dim = NormalizedDim(dim, rank);
  if (!OneMatrixLayout(dims, dim)) return std::nullopt;
  for (int64_t extent : dims) {
    if (extent < 0) return std::nullopt;
  }
  const int64_t extent = dims[dim];
  // offset > extent - size, written so that nothing overflows.
  if (size < 0 || size > extent || offset < 0 || offset > extent - size) return std::nullopt;
  const int64_t rows = dims[rank - 2], cols = dims[rank - 1];
  // Every product below is at most the tensor's element count, which fits (it is
  // allocated).
  if (dim == rank - 1) return MatrixBlock{offset, cols, rows * cols};
  if (dim == rank - 2) return MatrixBlock{offset * cols, cols, rows * cols};
  // A contiguous range: the elements of `offset` whole slabs along dim, the block dense.
  int64_t slab = 1;
  for (int64_t d = dim + 1; d < rank; ++d) slab *= dims[d];
  return MatrixBlock{offset * slab, cols, rows * cols};
}

bool RingBlockLandsInPlace(const Operation& update) {
  if (!update.Is(OpKind::kDynamicUpdateSlice) || update.num_operands() < 2 ||
      update.num_results() != 1 || !update.result(0)->type().is_tensor()) {
    return false;
  }
  const Value* block = update.operand(1);
  if (!IsRingBlock(block)) return false;
  const Block* where = block->kind() == Value::Kind::kBlockArgument
                           ? block->owner_block()
                           : (block->defining_op() != nullptr ? block->defining_op()->parent_block()
                                                              : nullptr);
  if (where != update.parent_block()) return false;
  const Type result = update.result(0)->type();
  return OneMatrixLayout(result.dims(), NormalizedDim(update.attrs().GetInt("dim", 0), result.rank()));
}

bool UpdatesDestinationInPlace(const Operation& update) {
  if (!update.Is(OpKind::kDynamicUpdateSlice) || update.num_operands() < 2) return false;
  const Value* destination = update.operand(0);
  if (destination->is_literal() || destination == update.operand(1)) return false;
  const Block* block = update.parent_block();
  if (block == nullptr) return false;
  // The destination must belong to this block: a value of an enclosing block lives on
  // after a loop iteration (the next one reads it again).
  const Block* defining = destination->kind() == Value::Kind::kBlockArgument
                              ? destination->owner_block()
                              : (destination->defining_op() == nullptr
                                     ? nullptr
                                     : destination->defining_op()->parent_block());
  if (defining != block) return false;
  for (const Operation* user : destination->users()) {
    const Operation* use = AncestorIn(block, user);
    if (use == nullptr || use == &update) continue;
    if (!use->IsBeforeInBlock(&update)) return false;
  }
  return true;
}

namespace {

// The dynamic_update_slice that `producer`'s only result may be written straight into, or
// null: the result's one use is the update (operand 1) of a dynamic_update_slice in
// producer's block that UpdatesDestinationInPlace, of the same element type; the
// destination and the offset are ready before `producer` runs, `producer` does not read
// the destination, and nothing between the two uses it (once the block is written there,
// the destination's old contents are not seen). What a matmul writing its block in place
// and a shift receiving its block in place both need.
const Operation* ResultWrittenStraightInto(const Operation& producer) {
  if (producer.num_results() != 1) return nullptr;
  const Value* block_value = producer.result(0);
  if (!block_value->type().is_tensor() || block_value->users().size() != 1) return nullptr;
  const Operation* update = block_value->users()[0];
  if (update->parent_block() != producer.parent_block() || update->num_operands() < 3 ||
      update->operand(1) != block_value || !UpdatesDestinationInPlace(*update)) {
    return nullptr;
  }
  const Value* destination = update->operand(0);
  if (block_value->type().element_type() != destination->type().element_type()) return nullptr;
  for (const Value* operand : producer.operands()) {
    if (operand == destination) return nullptr;
  }
  for (int i = 0; i < update->num_operands(); ++i) {
    if (i != 1 && !DefinedBefore(*update->operand(i), producer)) return nullptr;
  }
  const Block* block = producer.parent_block();
  for (const Operation* user : destination->users()) {
    const Operation* use = AncestorIn(block, user);
    if (use == nullptr || use == update) continue;
    if (use == &producer || producer.IsBeforeInBlock(use)) return nullptr;
  }
  return update;
}

}  // namespace

bool IsOneMatrix(absl::Span<const int64_t> dims) {
  if (dims.size() < 2) return false;
  for (size_t d = 0; d + 2 < dims.size(); ++d) {
    if (dims[d] != 1) return false;
  }
  return true;
}

int64_t MatrixDimOf(int64_t dim, int64_t rank) {
  if (rank < 2) return -1;
  dim = NormalizedDim(dim, rank);
  if (dim == rank - 2) return 0;
  if (dim == rank - 1) return 1;
  return -1;
}

const Operation* MatmulWritesInto(const Operation& matmul) {
  if (!matmul.Is(OpKind::kMatmul) || matmul.num_results() != 1) return nullptr;
  const Value* block_value = matmul.result(0);
  const Type block = block_value->type();
  if (!block.is_tensor() || !IsOneMatrix(block.dims())) return nullptr;
  const Operation* update = ResultWrittenStraightInto(matmul);
  if (update == nullptr) return nullptr;
  const Type destination = update->operand(0)->type();
  if (destination.rank() != block.rank() || !IsOneMatrix(destination.dims())) return nullptr;
  if (MatrixDimOf(update->attrs().GetInt("dim", 0), destination.rank()) < 0) return nullptr;
  return update;
}

const Operation* ShiftReceivesInto(const Operation& shift) {
  if (!shift.Is(OpKind::kShift)) return nullptr;
  const Operation* update = ResultWrittenStraightInto(shift);
  if (update == nullptr || !RingBlockLandsInPlace(*update)) return nullptr;
  return update;
}

namespace {

// How many values one offset's index arithmetic may take: the ring schedules' offsets
// take a handful, and a bound keeps a long or branching chain from costing more to check
// (and, in the interpreter, to work out for every step) than the copy it saves.
constexpr int kMaxIndexValues = 64;

bool IsIndexArithmetic(const Operation& op) {
  if (op.num_results() != 1 || !op.result(0)->type().is_index()) return false;
  switch (op.kind()) {
    case OpKind::kRank:
    case OpKind::kFull:
      return op.num_operands() == 0;
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kRem:
      return op.num_operands() == 2;
    default:
      return false;
  }
}

// Whether `value`, an index, is known before `loop` runs, for any iteration: a literal, a
// value defined before the loop, the induction variable (where `block` is the loop's
// body), or index arithmetic in `block` of such values. `budget` counts the values
// looked at.
bool IndexKnownAhead(const Value* value, const Operation& loop, const Block* block,
                     int& budget) {
  if (--budget < 0 || !value->type().is_index()) return false;
  if (value->is_literal()) return true;
  if (value->kind() == Value::Kind::kBlockArgument) {
    if (value->owner_block() == loop.region(0)) {
      return block == loop.region(0) && value->index() == 0;
    }
    return DefinedBefore(*value, loop);
  }
  const Operation* def = value->defining_op();
  if (def == nullptr) return false;
  if (DefinedBefore(*value, loop)) return true;
  if (def->parent_block() != block || !IsIndexArithmetic(*def)) return false;
  for (const Value* operand : def->operands()) {
    if (!IndexKnownAhead(operand, loop, block, budget)) return false;
  }
  return true;
}

// `value`'s one use is operand `position` of `op`, and nothing else uses it.
bool OnlyUseIs(const Value* value, const Operation* op, int position) {
  if (op == nullptr || position < 0 || position >= op->num_operands() ||
      op->operand(position) != value) {
    return false;
  }
  for (const Operation* user : value->users()) {
    if (user != op) return false;
  }
  for (int i = 0; i < op->num_operands(); ++i) {
    if (i != position && op->operand(i) == value) return false;
  }
  return true;
}

}  // namespace

std::optional<CarriedRing> CarriedBlockInSlot(const Operation& shift) {
  if (!shift.Is(OpKind::kShift) || shift.num_operands() < 1 || shift.num_results() != 1) {
    return std::nullopt;
  }
  const Block* body = shift.parent_block();
  const Operation* loop = body == nullptr ? nullptr : body->parent_op();
  if (loop == nullptr || !loop->Is(OpKind::kFor) || loop->num_regions() < 1 ||
      loop->region(0) != body) {
    return std::nullopt;
  }
  const Operation* yield = body->terminator();
  const Value* block = shift.operand(0);
  if (yield == nullptr || block->kind() != Value::Kind::kBlockArgument ||
      block->owner_block() != body || block->index() < 1) {
    return std::nullopt;
  }
  const int b = block->index() - 1;
  if (b >= loop->num_results() || !OnlyUseIs(shift.result(0), yield, b)) return std::nullopt;
  // The block's uses: the shift, one update, readers that take views.
  const Operation* update = nullptr;
  for (const Operation* user : block->users()) {
    if (user == &shift) continue;
    if (user->Is(OpKind::kDynamicUpdateSlice)) {
      if ((update != nullptr && update != user) || user->num_operands() < 3 ||
          user->operand(1) != block || user->operand(0) == block || user->operand(2) == block) {
        return std::nullopt;
      }
      update = user;
      continue;
    }
    if (!ReadsAsMatrices(*user, block)) return std::nullopt;
  }
  if (update == nullptr || update->parent_block() != body || !RingBlockLandsInPlace(*update) ||
      !UpdatesDestinationInPlace(*update)) {
    return std::nullopt;
  }
  // The gathered value: carried, updated only here, passed on as it is.
  const Value* gathered = update->operand(0);
  if (gathered->kind() != Value::Kind::kBlockArgument || gathered->owner_block() != body ||
      gathered->index() < 1 || !OnlyUseIs(gathered, update, 0)) {
    return std::nullopt;
  }
  const int g = gathered->index() - 1;
  if (g == b || g >= loop->num_results() || !OnlyUseIs(update->result(0), yield, g) ||
      block->type().element_type() != gathered->type().element_type()) {
    return std::nullopt;
  }
  // After the loop: the last block goes into the gathered result, read before by views.
  const Value* last_block = loop->result(b);
  const Value* all = loop->result(g);
  if (all->users().size() != 1) return std::nullopt;
  const Operation* last = all->users()[0];
  if (!last->Is(OpKind::kDynamicUpdateSlice) || last->num_operands() < 3 ||
      !OnlyUseIs(all, last, 0) || last->operand(1) != last_block ||
      last->operand(2) == last_block || last->parent_block() != loop->parent_block() ||
      !UpdatesDestinationInPlace(*last)) {
    return std::nullopt;
  }
  const int64_t rank = gathered->type().rank();
  if (NormalizedDim(last->attrs().GetInt("dim", 0), rank) !=
      NormalizedDim(update->attrs().GetInt("dim", 0), rank)) {
    return std::nullopt;
  }
  for (const Operation* user : last_block->users()) {
    if (user == last) continue;
    // Read before the last update: the gathered value is not written after it is read.
    if (!ReadsAsMatrices(*user, last_block) || user->parent_block() != last->parent_block() ||
        !user->IsBeforeInBlock(last)) {
      return std::nullopt;
    }
  }
  int budget = kMaxIndexValues;
  if (!IndexKnownAhead(update->operand(2), *loop, body, budget) ||
      !IndexKnownAhead(last->operand(2), *loop, loop->parent_block(), budget)) {
    return std::nullopt;
  }
  return CarriedRing{loop, b, g, &shift, update, last};
}

const Operation* UpdateReceivedByShift(const Operation& update) {
  if (!update.Is(OpKind::kDynamicUpdateSlice) || update.num_operands() < 2) return nullptr;
  const Value* block_value = update.operand(1);
  const Operation* shift = block_value->defining_op();
  if (block_value->kind() != Value::Kind::kResult || shift == nullptr) return nullptr;
  return ShiftReceivesInto(*shift) == &update ? shift : nullptr;
}

const Operation* UpdateWrittenByMatmul(const Operation& update) {
  if (!update.Is(OpKind::kDynamicUpdateSlice) || update.num_operands() < 2) return nullptr;
  const Value* block_value = update.operand(1);
  const Operation* matmul = block_value->defining_op();
  if (block_value->kind() != Value::Kind::kResult || matmul == nullptr) return nullptr;
  return MatmulWritesInto(*matmul) == &update ? matmul : nullptr;
}

std::optional<MatrixBlock> PlaceBlock(int64_t rows, int64_t cols, int64_t dim, int64_t offset,
                                      int64_t m, int64_t n) {
  if (dim < 0) dim += 2;
  if ((dim != 0 && dim != 1) || m < 0 || n < 0) return std::nullopt;
  // The block spans the other dimension whole.
  if ((dim == 0 ? n : m) != (dim == 0 ? cols : rows)) return std::nullopt;
  const int64_t dims[] = {rows, cols};
  return SliceAsMatrices(dims, dim, offset, dim == 0 ? m : n);
}

std::optional<BlockRows> SliceAsRows(absl::Span<const int64_t> dims, int64_t dim, int64_t offset,
                                     int64_t size) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  dim = NormalizedDim(dim, rank);
  if (dim < 0 || dim >= rank) return std::nullopt;
  for (int64_t extent : dims) {
    if (extent < 0) return std::nullopt;
  }
  const int64_t extent = dims[dim];
  // offset > extent - size, written so that nothing overflows.
  if (size < 0 || size > extent || offset < 0 || offset > extent - size) return std::nullopt;
  // Every product below is at most the tensor's element count, which fits (it is
  // allocated).
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= dims[d];
  for (int64_t d = dim + 1; d < rank; ++d) inner *= dims[d];
  return BlockRows{offset * inner, size * inner, extent * inner, outer};
}

namespace {

// One dynamic_update_slice of a buffer's chain (FillOverwrittenBeforeRead), and the loop
// whose body holds it (null: straight-line code).
struct ChainUpdate {
  const Operation* update = nullptr;
  const Operation* loop = nullptr;
  int64_t size = 0;
};

// Where following a buffer's chain ended: at the value its first reader reads (`end`),
// or nowhere the rule accepts (a loop body read the buffer, the updates cross
// dimensions).
struct ChainEnd {
  bool ok = false;
  const Value* end = nullptr;
};

// `value`'s only use, counting each operand position (null if it has none or several).
const Operation* SoleUser(const Value* value, int* position) {
  const Operation* only = nullptr;
  int uses = 0;
  for (const Operation* user : value->users()) {
    if (only != nullptr && user == only) continue;  // one op listed once per use
    if (only != nullptr) return nullptr;
    only = user;
    for (int i = 0; i < user->num_operands(); ++i) {
      if (user->operand(i) == value) {
        ++uses;
        *position = i;
      }
    }
  }
  return uses == 1 ? only : nullptr;
}

// Follows the chain from `value` (in `loop`'s body, or outside any loop when null),
// appending its updates along `*dim` (set by the first).
ChainEnd FollowChain(const Value* value, const Operation* loop, int64_t* dim,
                     std::vector<ChainUpdate>& updates) {
  while (true) {
    int position = -1;
    const Operation* user = SoleUser(value, &position);
    if (user == nullptr) return {true, value};
    if (user->Is(OpKind::kDynamicUpdateSlice) && position == 0 && user->num_operands() == 3 &&
        user->num_results() == 1) {
      const Type destination = value->type();
      const Type block = user->operand(1)->type();
      if (!destination.is_tensor() || !block.is_tensor() || destination.rank() != block.rank() ||
          destination.rank() < 1) {
        return {true, value};
      }
      const int64_t d = NormalizedDim(user->attrs().GetInt("dim", 0), destination.rank());
      if (d < 0 || d >= destination.rank()) return {true, value};
      bool whole = true;
      for (int64_t k = 0; k < destination.rank(); ++k) {
        if (k != d && destination.dims()[k] != block.dims()[k]) whole = false;
      }
      if (!whole) return {true, value};
      if (*dim < 0) *dim = d;
      if (*dim != d) return {false, nullptr};
      updates.push_back({user, loop, block.dims()[d]});
      value = user->result(0);
      continue;
    }
    if (user->Is(OpKind::kFor) && loop == nullptr && user->num_regions() == 1 &&
        position + 1 < user->region(0)->num_arguments() && position < user->num_results()) {
      const Block* body = user->region(0);
      ChainEnd inner = FollowChain(body->argument(position + 1), user, dim, updates);
      if (!inner.ok) return inner;
      int yielded = -1;
      const Operation* yield = SoleUser(inner.end, &yielded);
      // The body's chain must reach the yield in the same place: read in the body, the
      // buffer would be read before the last iteration has written it.
      if (yield == nullptr || yield != body->terminator() || yielded != position) {
        return {false, nullptr};
      }
      value = user->result(position);
      continue;
    }
    return {true, value};
  }
}

// `value`, an index, on `device` at induction variable `iv` of `loop` (null outside one);
// empty where it is not index arithmetic the rule works out, or it fails (division by
// zero, overflow: the interpreter's error at run time).
std::optional<int64_t> IndexValue(const Value* value, const Mesh* mesh, int64_t device,
                                  const Operation* loop, int64_t iv, int& budget) {
  if (--budget < 0 || !value->type().is_index()) return std::nullopt;
  if (value->is_literal()) return static_cast<int64_t>(value->literal_value());
  if (value->kind() == Value::Kind::kBlockArgument) {
    if (loop != nullptr && value->owner_block() == loop->region(0) && value->index() == 0) {
      return iv;
    }
    return std::nullopt;
  }
  const Operation* op = value->defining_op();
  if (op == nullptr || !IsIndexArithmetic(*op)) return std::nullopt;
  if (op->Is(OpKind::kRank)) {
    const Attribute* axis = op->attrs().Find("axis");
    if (mesh == nullptr) return 0;
    if (axis == nullptr) return std::nullopt;
    return mesh->GroupCoordinate(device, axis->axes());
  }
  if (op->Is(OpKind::kFull)) return op->attrs().GetInt("value", 0);
  std::optional<int64_t> a = IndexValue(op->operand(0), mesh, device, loop, iv, budget);
  if (!a.has_value()) return std::nullopt;
  std::optional<int64_t> b = IndexValue(op->operand(1), mesh, device, loop, iv, budget);
  if (!b.has_value()) return std::nullopt;
  int64_t out = 0;
  switch (op->kind()) {
    case OpKind::kAdd:
      if (__builtin_add_overflow(*a, *b, &out)) return std::nullopt;
      return out;
    case OpKind::kSub:
      if (__builtin_sub_overflow(*a, *b, &out)) return std::nullopt;
      return out;
    case OpKind::kMul:
      if (__builtin_mul_overflow(*a, *b, &out)) return std::nullopt;
      return out;
    case OpKind::kDiv:
      if (*b == 0 || (*b == -1 && *a == INT64_MIN)) return std::nullopt;
      return scalar_math::FloorDiv(*a, *b);
    case OpKind::kRem:
      if (*b == 0) return std::nullopt;
      return scalar_math::FloorRem(*a, *b);
    default:
      return std::nullopt;
  }
}

const Function* FunctionOf(const Operation& op) {
  const Block* block = op.parent_block();
  while (block != nullptr && block->parent_function() == nullptr) {
    const Operation* parent = block->parent_op();
    block = parent == nullptr ? nullptr : parent->parent_block();
  }
  return block == nullptr ? nullptr : block->parent_function();
}

}  // namespace

bool FillOverwrittenBeforeRead(const Operation& full) {
  if (!full.Is(OpKind::kFull) || full.num_operands() != 0 || full.num_results() != 1 ||
      !full.result(0)->type().is_tensor()) {
    return false;
  }
  int64_t dim = -1;
  std::vector<ChainUpdate> updates;
  ChainEnd chain = FollowChain(full.result(0), nullptr, &dim, updates);
  if (!chain.ok || updates.empty() || dim < 0) return false;
  const int64_t extent = full.result(0)->type().dims()[dim];
  const Function* function = FunctionOf(full);
  const Mesh* mesh = function == nullptr ? nullptr : function->mesh();
  const int64_t devices = mesh == nullptr ? 1 : mesh->num_devices();
  // Each update is worked out once per device and iteration: bound the total first.
  int64_t evaluations = 0;
  for (const ChainUpdate& u : updates) {
    int64_t trips = 1;
    if (u.loop != nullptr) {
      const int64_t lower = u.loop->attrs().GetInt("lower", 0);
      const int64_t upper = u.loop->attrs().GetInt("upper", 0);
      const int64_t step = u.loop->attrs().GetInt("step", 1);
      if (step <= 0) return false;
      trips = upper > lower ? (upper - lower + step - 1) / step : 0;
    }
    evaluations += trips;
    if (evaluations > kMaxFillEvaluations) return false;
  }
  if (devices <= 0 || evaluations > kMaxFillEvaluations / devices) return false;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int64_t device = 0; device < devices; ++device) {
    blocks.clear();
    for (const ChainUpdate& u : updates) {
      int64_t lower = 0, upper = 1, step = 1;
      if (u.loop != nullptr) {
        lower = u.loop->attrs().GetInt("lower", 0);
        upper = u.loop->attrs().GetInt("upper", 0);
        step = u.loop->attrs().GetInt("step", 1);
      }
      for (int64_t iv = lower; iv < upper; iv += step) {
        int budget = kMaxIndexValues;
        std::optional<int64_t> offset =
            IndexValue(u.update->operand(2), mesh, device, u.loop, iv, budget);
        // Out of range: dynamic_update_slice's run-time error, which the update reports.
        if (!offset.has_value() || *offset < 0 || u.size < 0 || *offset > extent - u.size) {
          return false;
        }
        blocks.emplace_back(*offset, *offset + u.size);
      }
    }
    std::sort(blocks.begin(), blocks.end());
    int64_t covered = 0;
    for (const auto& [begin, end] : blocks) {
      if (begin > covered) return false;
      covered = std::max(covered, end);
    }
    if (covered < extent) return false;
  }
  return true;
}

}  // namespace commir::runtime
