// The losses: cross_entropy and its backward, cross_entropy_grad (cross_entropy_op.h
// gives the formulas). The forward returns, with the loss, the per-token log-sum-exp its
// backward reuses, as FlashAttention returns its lse: the backward then needs no second
// pass over the logits to normalise them.
//
// In spmd functions both take a trailing `offset` index (the vocabulary-parallel form
// lower-to-spmd emits, as gather's offset): the logits are the classes [offset, offset +
// local classes) of `classes` in all. cross_entropy then also takes the whole
// vocabulary's lse (before the offset) and returns this shard's share of the loss, which
// summed over the shards is the loss; cross_entropy_grad returns the shard's columns of
// dlogits.
#include <cmath>

#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

// Statistics are computed in f64 for f64 logits and in f32 otherwise, as the kernels do.
ElementType StatsType(ElementType logits) {
  return logits == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

absl::Status CheckLossAttrs(const OpDef& def, const OpSignature& sig) {
  double smoothing = def.NumberAttr(sig.attrs, "label_smoothing");
  if (!(smoothing >= 0 && smoothing <= 1)) {
    return OpError("label_smoothing must be in [0, 1], got %g", smoothing);
  }
  double z_loss = def.NumberAttr(sig.attrs, "z_loss");
  if (!(z_loss >= 0 && std::isfinite(z_loss))) {
    return OpError("z_loss must be finite and >= 0, got %g", z_loss);
  }
  return absl::OkStatus();
}

// Checks logits [..., V] (float, V >= 1) and labels [...] (i32 or i64); returns the
// token dims (the labels' shape).
absl::StatusOr<std::vector<int64_t>> TokenDims(const OpSignature& sig) {
  absl::StatusOr<Type> logits = TensorOperand(sig, 0, "the logits");
  if (!logits.ok()) return logits.status();
  if (absl::Status s = RequireFloat(*logits, "the logits"); !s.ok()) return s;
  if (logits->rank() == 0) return OpError("the logits need rank >= 1 (the last dim is the classes)");
  if (logits->dims().back() < 1) return OpError("the logits need at least one class");
  absl::StatusOr<Type> labels = TensorOperand(sig, 1, "the labels");
  if (!labels.ok()) return labels.status();
  if (labels->element_type() != ElementType::kI32 && labels->element_type() != ElementType::kI64) {
    return OpError("the labels must be i32 or i64, got %s", labels->ToString());
  }
  std::vector<int64_t> tokens(logits->dims().begin(), logits->dims().end() - 1);
  if (labels->dims() != tokens) {
    return OpError("the labels must be %s (the logits %s without the class dim), got %s",
                   FormatShape(tokens), logits->ToString(), labels->ToString());
  }
  return tokens;
}

std::vector<int64_t> LossDims(const OpDef& def, const OpSignature& sig,
                              const std::vector<int64_t>& tokens) {
  if (def.EnumAttr(sig.attrs, "reduction") == "none") return tokens;
  return {};
}

// The vocabulary-parallel form's checks: the offset (operand `offset_at`) only in spmd
// functions, and `classes` (the whole vocabulary) written exactly there and no smaller
// than the local classes.
absl::Status CheckVocabShard(const OpDef& def, const OpSignature& sig, size_t offset_at) {
  const int64_t classes = def.IntAttr(sig.attrs, "classes");
  const bool sharded = sig.operand_types.size() > offset_at;
  if (!sharded) {
    if (classes != 0) return OpError("classes is written only with an offset (spmd functions)");
    return absl::OkStatus();
  }
  if (absl::Status s = IndexOperand(sig, static_cast<int>(offset_at), "the offset"); !s.ok()) {
    return s;
  }
  if (!sig.in_spmd) {
    return OpError("%s takes an offset only in spmd functions", def.name);
  }
  const Type& logits = sig.operand_types[0];
  if (logits.is_tensor() && logits.rank() > 0 && classes < logits.dims().back()) {
    return OpError("classes (%d) must be at least the logits' %d local classes", classes,
                   logits.dims().back());
  }
  return absl::OkStatus();
}

absl::Status CheckLse(const OpSignature& sig, int i, Type logits,
                      const std::vector<int64_t>& tokens) {
  absl::StatusOr<Type> lse = TensorOperand(sig, i, "lse");
  if (!lse.ok()) return lse.status();
  Type want_lse = Type::Tensor(StatsType(logits.element_type()), tokens);
  if (lse->dims() != want_lse.dims() || lse->element_type() != want_lse.element_type()) {
    return OpError("lse must be %s (cross_entropy's second result), got %s", want_lse.ToString(),
                   lse->ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Type>> InferCrossEntropy(const OpSignature& sig) {
  const OpDef& def = GetOpDef(OpKind::kCrossEntropy);
  if (absl::Status s = CheckLossAttrs(def, sig); !s.ok()) return s;
  if (sig.operand_types.size() == 3) {
    return OpError("cross_entropy takes 2 operands, or 4 (logits, labels, lse, offset) in its "
                   "vocabulary-parallel form");
  }
  if (absl::Status s = CheckVocabShard(def, sig, 3); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> tokens = TokenDims(sig);
  if (!tokens.ok()) return tokens.status();
  ElementType et = sig.operand_types[0].element_type();
  if (sig.operand_types.size() == 4) {
    if (absl::Status s = CheckLse(sig, 2, sig.operand_types[0], *tokens); !s.ok()) return s;
  }
  return std::vector<Type>{Type::Tensor(et, LossDims(def, sig, *tokens)),
                           Type::Tensor(StatsType(et), *tokens)};
}

// cross_entropy_grad(logits, labels, lse, dloss) -> dlogits in dloss's element type (a
// bf16 forward may have f32 gradients).
absl::StatusOr<std::vector<Type>> InferCrossEntropyGrad(const OpSignature& sig) {
  const OpDef& def = GetOpDef(OpKind::kCrossEntropyGrad);
  if (absl::Status s = CheckLossAttrs(def, sig); !s.ok()) return s;
  if (absl::Status s = CheckVocabShard(def, sig, 4); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> tokens = TokenDims(sig);
  if (!tokens.ok()) return tokens.status();
  const Type& logits = sig.operand_types[0];
  if (absl::Status s = CheckLse(sig, 2, logits, *tokens); !s.ok()) return s;
  absl::StatusOr<Type> dloss = TensorOperand(sig, 3, "dloss");
  if (!dloss.ok()) return dloss.status();
  if (absl::Status s = RequireFloat(*dloss, "dloss"); !s.ok()) return s;
  std::vector<int64_t> loss_dims = LossDims(def, sig, *tokens);
  if (dloss->dims() != loss_dims) {
    return OpError("dloss must have the loss's shape %s, got %s", FormatShape(loss_dims),
                   dloss->ToString());
  }
  return std::vector<Type>{Type::Tensor(dloss->element_type(), logits.dims())};
}

// Memory-bound by the logits' bytes, counted once: the cuda kernel gives each row one
// block, which reads the row for its maximum and again, from L2 (a 128K-class bf16 row is
// 256 KiB), for its sum of exponentials, target logit and smoothing sum, then writes a few
// bytes per token; a second, one-block launch reduces the token losses (mean, sum) or
// stores them (none). About 5 FLOPs per logit (max, subtract, exp, add, smoothing sum).
OpCost CrossEntropyCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {5.0 * sig.operand_types[0].num_elements(), StreamingBytes(sig, results), 0};
}

// One launch: reads the logits once and writes dlogits once, exp(x - lse), a scale and
// the target's subtraction, about 5 FLOPs per logit.
OpCost CrossEntropyGradCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {5.0 * sig.operand_types[0].num_elements(), StreamingBytes(sig, results), 0};
}

std::vector<AttrSpec> LossAttrs() {
  return {
      {.name = "reduction", .kind = AttrKind::kEnum, .enum_values = {"mean", "sum", "none"},
       .default_value = Attribute::Ident("mean")},
      {.name = "ignore_index", .kind = AttrKind::kInt, .default_value = Attribute::Int(-100)},
      {.name = "label_smoothing", .kind = AttrKind::kNumber,
       .default_value = Attribute::Float(0.0)},
      {.name = "z_loss", .kind = AttrKind::kNumber, .default_value = Attribute::Float(0.0)},
      // The whole vocabulary's class count, written only in the vocabulary-parallel form
      // (with an offset): label smoothing spreads s over all of it.
      {.name = "classes", .kind = AttrKind::kInt, .default_value = Attribute::Int(0)},
  };
}

}  // namespace

void AppendLossOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kCrossEntropy,
      .name = "cross_entropy",
      .summary = "softmax cross-entropy over the last dim with integer labels; loss and lse",
      .min_operands = 2,
      .max_operands = 4,
      .min_results = 2,
      .max_results = 2,
      .attrs = LossAttrs(),
      .infer = InferCrossEntropy,
      .cost = CrossEntropyCost,
      .vjp = CrossEntropyVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kCrossEntropyGrad,
      .name = "cross_entropy_grad",
      .summary = "cross_entropy's backward: dlogits from logits, labels, lse and dloss",
      .min_operands = 4,
      .max_operands = 5,
      .attrs = LossAttrs(),
      .infer = InferCrossEntropyGrad,
      .cost = CrossEntropyGradCost,
  });
}

}  // namespace commir::ops
