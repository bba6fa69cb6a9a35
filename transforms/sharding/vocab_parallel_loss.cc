#include "transforms/sharding/vocab_parallel_loss.h"

#include <utility>
#include <vector>

#include "commir/cross_entropy_op.h"
#include "commir/status_macros.h"
#include "transforms/sharding/layout.h"

namespace commir::sharding {
namespace {

using Operand = OpBuilder::Operand;


// The global index of this device's first class: rank(axes) * local classes.
absl::StatusOr<Value*> ClassOffset(const DecompositionInput& in, const AxisList& axes) {
  OpBuilder& e = in.emitter;
  const Type logits = in.operands[kCeLogits].value->type();
  const int64_t local = logits.dims().back();
  COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
  Value* offset = rank;
  if (local != 1) {
    COMMIR_ASSIGN_OR_RETURN(offset, e.CreateValue(OpKind::kMul, {rank, Operand::Literal(
                                                                         static_cast<double>(local),
                                                                         Type::Index())}));
  }
  offset->set_name("class_offset");
  return offset;
}

// `attrs` with the whole vocabulary's size, which label smoothing divides by.
AttrDict WithClasses(const DecompositionInput& in, AttrDict attrs) {
  attrs.Set("classes", Attribute::Int(in.global_operand_types[kCeLogits].dims().back()));
  return attrs;
}

AttrDict OverClasses(int64_t last) {
  AttrDict attrs;
  attrs.Set("dims", Attribute::IntList({last}));
  attrs.Set("keepdim", Attribute::Bool(true));
  return attrs;
}

AttrDict AllReduceOver(const AxisList& axes, bool max) {
  AttrDict attrs = AxisAttrs(axes);
  if (max) attrs.Set("reduce", Attribute::Ident("max"));
  return attrs;
}

}  // namespace

const AxisList& ClassAxes(const DecompositionInput& in) {
  const std::vector<std::vector<int>>& logits = in.rule.operands[kCeLogits].dims;
  return in.choice.strategy.factors[logits.back()[0]];
}

DecompositionResult DecomposeVocabParallelCrossEntropy(const DecompositionInput& in) {
  if (ClassAxes(in).empty()) return std::nullopt;
  COMMIR_ASSIGN_OR_RETURN(Operation * share, EmitVocabParallelLossShare(in, in.op.attrs()));
  COMMIR_ASSIGN_OR_RETURN(Value* loss, in.emitter.CreateValue(OpKind::kAllReduce, {share->result(0)},
                                                              AllReduceOver(ClassAxes(in), false)));
  // The shares are summed in the statistics' type, rounded to the logits' type once.
  const ElementType logits_type = in.operands[kCeLogits].value->type().element_type();
  if (loss->type().element_type() != logits_type) {
    Type to[] = {loss->type().WithElementType(logits_type)};
    COMMIR_ASSIGN_OR_RETURN(loss, in.emitter.CreateValue(OpKind::kConvert, {loss}, {}, to));
  }
  return std::vector<Value*>{loss, share->result(1)};
}

absl::StatusOr<Operation*> EmitVocabParallelLossShare(const DecompositionInput& in,
                                                      const AttrDict& attrs) {
  const AxisList& axes = ClassAxes(in);
  OpBuilder& e = in.emitter;
  Value* logits = in.operands[kCeLogits].value;
  const Type type = logits->type();
  const int64_t last = type.rank() - 1;
  // The statistics in f32 (f64 for f64 logits), as the kernels compute them.
  const ElementType stats = type.element_type() == ElementType::kF64 ? ElementType::kF64
                                                                      : ElementType::kF32;
  Value* x = logits;
  if (type.element_type() != stats) {
    Type to[] = {type.WithElementType(stats)};
    COMMIR_ASSIGN_OR_RETURN(x, e.CreateValue(OpKind::kConvert, {logits}, {}, to));
  }
  // 1. The row's maximum over every shard.
  COMMIR_ASSIGN_OR_RETURN(Value* local_max, e.CreateValue(OpKind::kReduceMax, {x}, OverClasses(last)));
  local_max->set_name("local_max");
  COMMIR_ASSIGN_OR_RETURN(Value* row_max,
                          e.CreateValue(OpKind::kAllReduce, {local_max}, AllReduceOver(axes, true)));
  row_max->set_name("row_max");
  // A row whose maximum is infinite (all -inf, or a +inf) has nothing finite to shift by:
  // x - max would be inf - inf = NaN. It is shifted by 0 instead, so an all -inf row sums
  // exp(-inf) = 0 and its lse is -inf, and a row holding +inf gets lse +inf, as the
  // one-device kernel gives them (backend_cpu/cross_entropy.cc). max - max is 0 exactly
  // when max is finite.
  COMMIR_ASSIGN_OR_RETURN(Value* max_less_max, e.CreateValue(OpKind::kSub, {row_max, row_max}));
  const Type max_type = row_max->type();
  AttrDict equal;
  equal.Set("cmp", Attribute::Ident("eq"));
  COMMIR_ASSIGN_OR_RETURN(
      Value* finite,
      e.CreateValue(OpKind::kCompare,
                    {max_less_max, OpBuilder::Operand::Literal(0, Type::Scalar(max_type.element_type()))},
                    std::move(equal)));
  AttrDict zero_value;
  zero_value.Set("value", Attribute::Float(0));
  Type zero_type[] = {Type::Scalar(max_type.element_type())};
  COMMIR_ASSIGN_OR_RETURN(Value* zero,
                          e.CreateValue(OpKind::kFull, {}, std::move(zero_value), zero_type));
  COMMIR_ASSIGN_OR_RETURN(Value* shift,
                          e.CreateValue(OpKind::kSelect, {finite, row_max, zero}));
  shift->set_name("row_shift");
  // 2. The row's sum of exponentials, shifted by that maximum, over every shard.
  COMMIR_ASSIGN_OR_RETURN(Value* shifted, e.CreateValue(OpKind::kSub, {x, shift}));
  COMMIR_ASSIGN_OR_RETURN(Value* exps, e.CreateValue(OpKind::kExp, {shifted}));
  COMMIR_ASSIGN_OR_RETURN(Value* local_sum, e.CreateValue(OpKind::kReduceSum, {exps}, OverClasses(last)));
  local_sum->set_name("local_sum_exp");
  COMMIR_ASSIGN_OR_RETURN(Value* row_sum,
                          e.CreateValue(OpKind::kAllReduce, {local_sum}, AllReduceOver(axes, false)));
  row_sum->set_name("row_sum_exp");
  COMMIR_ASSIGN_OR_RETURN(Value* log_sum, e.CreateValue(OpKind::kLog, {row_sum}));
  COMMIR_ASSIGN_OR_RETURN(Value* lse_kept, e.CreateValue(OpKind::kAdd, {shift, log_sum}));
  std::vector<int64_t> tokens(type.dims().begin(), type.dims().end() - 1);
  Type lse_type[] = {Type::Tensor(stats, tokens)};
  COMMIR_ASSIGN_OR_RETURN(Value* lse, e.CreateValue(OpKind::kReshape, {lse_kept}, {}, lse_type));
  lse->set_name("row_lse");
  // 3. Each shard's share of the loss (its target logits, its smoothing sum, and lse on
  // the first shard), reduced over the tokens, summed over the shards. The shares are
  // summed in the statistics' type: lse and the target logit nearly cancel, so bf16
  // shares would lose the loss's leading bits; the sum is rounded to the logits' type once.
  COMMIR_ASSIGN_OR_RETURN(Value* offset, ClassOffset(in, axes));
  COMMIR_ASSIGN_OR_RETURN(
      Operation * share,
      e.Create(OpKind::kCrossEntropy, {x, in.operands[kCeLabels], lse, offset},
               WithClasses(in, attrs), {}, 2));
  share->result(0)->set_name("loss_share");
  return share;
}

DecompositionResult DecomposeVocabParallelCrossEntropyGrad(const DecompositionInput& in) {
  if (ClassAxes(in).empty()) return std::nullopt;
  std::vector<Operand> operands(in.operands.begin(), in.operands.end());
  COMMIR_ASSIGN_OR_RETURN(Value* grad, EmitVocabParallelLossGrad(in, operands, in.op.attrs()));
  return std::vector<Value*>{grad};
}

absl::StatusOr<Value*> EmitVocabParallelLossGrad(const DecompositionInput& in,
                                                 std::vector<OpBuilder::Operand> operands,
                                                 const AttrDict& attrs) {
  COMMIR_ASSIGN_OR_RETURN(Value* offset, ClassOffset(in, ClassAxes(in)));
  operands.push_back(offset);
  return in.emitter.CreateValue(OpKind::kCrossEntropyGrad, operands, WithClasses(in, attrs));
}

}  // namespace commir::sharding
