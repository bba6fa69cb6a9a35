// The derivative rules (OpDef::vjp) of the op definitions, one per differentiable op,
// attached to their ops where the op tables are built (elementwise_ops.cc, ...).
#ifndef COMMIR_COMMIR_OPS_VJP_RULES_H_
#define COMMIR_COMMIR_OPS_VJP_RULES_H_

#include "commir/op_def.h"

namespace commir::ops {

// elementwise_vjp.cc: every elementwise op but compare (whose i1 result carries no
// gradient), and convert.
VjpRule ElementwiseVjpRule(OpKind kind);
// linalg_vjp.cc.
absl::StatusOr<std::vector<Value*>> MatmulVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> AttentionVjp(OpBuilder& b, const VjpArgs& args);
// normalization_vjp.cc.
absl::StatusOr<std::vector<Value*>> ReduceVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> SoftmaxVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> LayerNormVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> RmsNormVjp(OpBuilder& b, const VjpArgs& args);
// layout_vjp.cc.
absl::StatusOr<std::vector<Value*>> ReshapeVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> TransposeVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> SliceVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> ConcatVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> BroadcastVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> ReshardVjp(OpBuilder& b, const VjpArgs& args);
// loss_vjp.cc.
absl::StatusOr<std::vector<Value*>> CrossEntropyVjp(OpBuilder& b, const VjpArgs& args);
// topk_vjp.cc.
absl::StatusOr<std::vector<Value*>> TopKVjp(OpBuilder& b, const VjpArgs& args);

}  // namespace commir::ops

#endif  // COMMIR_COMMIR_OPS_VJP_RULES_H_
