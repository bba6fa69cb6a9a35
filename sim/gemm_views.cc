#include "sim/gemm_views.h"

#include <cstdint>
#include <vector>

#include "runtime/in_place.h"

namespace commir::sim {
namespace {

// A block of `dims` taken along `dim` is one strided matrix layout: a pointer offset
// along the rows or the columns (the last two dimensions) of the whole tensor, or a
// contiguous range when every dimension before `dim` is 1.
bool OneMatrixLayout(const std::vector<int64_t>& dims, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (dim < 0 || dim >= rank) return false;
  if (dim >= rank - 2) return true;
  for (int64_t d = 0; d < dim; ++d) {
    if (dims[d] != 1) return false;
  }
  return true;
}

bool IsMatmul(const Operation* op) { return op != nullptr && op->Is(OpKind::kMatmul); }

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

bool IsGemmBlockInPlace(const Operation& op) {
  if (op.num_results() != 1 || !op.result(0)->type().is_tensor()) return false;
  if (!op.Is(OpKind::kDynamicSlice) && !op.Is(OpKind::kDynamicUpdateSlice)) return false;
  const int64_t dim = op.RequiredIntAttr("dim");  // verified: both ops require it
  if (op.Is(OpKind::kDynamicSlice)) {
    const Value* block = op.result(0);
    if (block->use_empty()) return false;
    for (const Operation* user : block->users()) {
      if (!IsMatmul(user)) return false;
    }
    return OneMatrixLayout(op.operand(0)->type().dims(), dim);
  }
  if (op.Is(OpKind::kDynamicUpdateSlice)) {
    if (op.num_operands() < 2) return false;
    // A GEMM's block: only where the backends store it in place (the destination dies
    // here, runtime/in_place.h), so what is priced is what runs.
    if (runtime::UpdateWrittenByMatmul(op) != nullptr) return true;
    // A received block written into the gathered buffer: the transfer lands there.
    const Value* update = op.operand(1);
    if (!IsRingBlock(update)) return false;
    const Block* where = update->kind() == Value::Kind::kBlockArgument
                             ? update->owner_block()
                             : (update->defining_op() != nullptr ? update->defining_op()->parent_block()
                                                                 : nullptr);
    if (where != op.parent_block()) return false;
    return OneMatrixLayout(op.result(0)->type().dims(), dim);
  }
  return false;
}

}  // namespace commir::sim
