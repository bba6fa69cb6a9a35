#include "runtime/in_place.h"

#include <cstdint>
#include <vector>

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
    if (user->Is(OpKind::kMatmul)) continue;
    if (!user->Is(OpKind::kAttention) && !user->Is(OpKind::kAttentionGrad)) return false;
    // q, k and v are strided (FlashAttention's backward takes them as its forward does);
    // any other operand (o, lse, dout, positions) is not.
    for (int i = 3; i < user->num_operands(); ++i) {
      if (user->operand(i) == block) return false;
    }
  }
  return OneMatrixLayout(source->type().dims(), extent->dim);
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

const Operation* MatmulWritesInto(const Operation& matmul) {
  if (!matmul.Is(OpKind::kMatmul) || matmul.num_results() != 1) return nullptr;
  const Value* block_value = matmul.result(0);
  if (!block_value->type().is_tensor() || block_value->type().rank() != 2) return nullptr;
  const Operation* update = ResultWrittenStraightInto(matmul);
  if (update == nullptr || update->operand(0)->type().rank() != 2) return nullptr;
  const int64_t dim = update->attrs().GetInt("dim", 0);
  if (dim != 0 && dim != 1 && dim != -1 && dim != -2) return nullptr;
  return update;
}

const Operation* ShiftReceivesInto(const Operation& shift) {
  if (!shift.Is(OpKind::kShift)) return nullptr;
  const Operation* update = ResultWrittenStraightInto(shift);
  if (update == nullptr || !RingBlockLandsInPlace(*update)) return nullptr;
  return update;
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

}  // namespace commir::runtime
