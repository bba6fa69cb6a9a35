// Named views of attention's operands, the way MLIR's generated accessors name them:
// q, k, v, then the optional index operands q_pos and k_pos (the sequence positions of
// the first query and the first key; written in that order, so k_pos needs q_pos).
#ifndef COMMIR_COMMIR_ATTENTION_OP_H_
#define COMMIR_COMMIR_ATTENTION_OP_H_

#include "commir/check.h"
#include "commir/ir.h"

namespace commir {

class AttentionOp {
 public:
  // Operand positions, for code that keeps a vector parallel to the operands (a
  // partitioner's lowered operands).
  enum OperandIndex { kQ = 0, kK = 1, kV = 2, kQPos = 3, kKPos = 4 };

  explicit AttentionOp(const Operation& op) : op_(op) {
    COMMIR_CHECK(op.Is(OpKind::kAttention), "AttentionOp views an attention op");
  }

  Value* q() const { return op_.operand(kQ); }
  Value* k() const { return op_.operand(kK); }
  Value* v() const { return op_.operand(kV); }
  // Null when not written.
  Value* q_pos() const { return Optional(kQPos); }
  Value* k_pos() const { return Optional(kKPos); }
  bool causal() const { return op_.BoolAttr("causal"); }

 private:
  Value* Optional(int index) const {
    return op_.num_operands() > index ? op_.operand(index) : nullptr;
  }
  const Operation& op_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_ATTENTION_OP_H_
