// Named views of attention's operands, the way MLIR's generated accessors name them:
// q, k, v, then the optional index operands q_pos and k_pos (the sequence positions of
// the first query and the first key; written in that order, so k_pos needs q_pos).
#ifndef COMMIR_COMMIR_ATTENTION_OP_H_
#define COMMIR_COMMIR_ATTENTION_OP_H_

#include <cmath>
#include <cstdint>

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
  // What q k^T is multiplied by: the written `scale`, else DefaultScale(head_dim). Every
  // executor reads the scale here, passing the head dim (last extent) of the q it holds:
  // in a spmd function q's written type is the global one and may split that dimension,
  // so the type alone does not give the per-device extent.
  double scale(int64_t head_dim) const {
    if (const Attribute* written = op_.attrs().Find("scale")) return written->number_value();
    return DefaultScale(head_dim);
  }
  // 1 / sqrt(head_dim); 1 when head_dim is 0 (every score is 0 then anyway). The one
  // spelling of the default, also for kernels called without an op.
  static double DefaultScale(int64_t head_dim) {
    return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
  }

 private:
  Value* Optional(int index) const {
    return op_.num_operands() > index ? op_.operand(index) : nullptr;
  }
  const Operation& op_;
};

// attention_grad(q, k, v, o, lse, dout[, q_pos[, k_pos]]) -> dq, dk, dv: attention's
// backward, with attention's attributes and index operands after its three extra ones.
class AttentionGradOp {
 public:
  enum OperandIndex { kQ = 0, kK = 1, kV = 2, kO = 3, kLse = 4, kDout = 5, kQPos = 6, kKPos = 7 };

  explicit AttentionGradOp(const Operation& op) : op_(op) {
    COMMIR_CHECK(op.Is(OpKind::kAttentionGrad), "AttentionGradOp views an attention_grad op");
  }

  Value* q() const { return op_.operand(kQ); }
  Value* k() const { return op_.operand(kK); }
  Value* v() const { return op_.operand(kV); }
  Value* o() const { return op_.operand(kO); }
  Value* lse() const { return op_.operand(kLse); }
  Value* dout() const { return op_.operand(kDout); }
  // Null when not written.
  Value* q_pos() const { return op_.num_operands() > kQPos ? op_.operand(kQPos) : nullptr; }
  Value* k_pos() const { return op_.num_operands() > kKPos ? op_.operand(kKPos) : nullptr; }
  bool causal() const { return op_.BoolAttr("causal"); }
  // lse is the softmax normaliser over a superset of k's keys: p = exp(s - lse) is that
  // block's share, used without renormalising its rows (docs/language.md).
  bool partial_keys() const { return op_.BoolAttr("partial_keys"); }
  // As AttentionOp::scale.
  double scale(int64_t head_dim) const {
    if (const Attribute* written = op_.attrs().Find("scale")) return written->number_value();
    return AttentionOp::DefaultScale(head_dim);
  }

 private:
  const Operation& op_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_ATTENTION_OP_H_
