#include "transforms/sharding/token_parallel_loss.h"

#include <cstdint>
#include <vector>

#include "commir/cross_entropy_op.h"
#include "commir/status_macros.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/vocab_parallel_loss.h"

namespace commir::sharding {
namespace {

using Operand = OpBuilder::Operand;

// The mesh axes the token dims (all of the logits' dims but the last) are split over.
AxisList TokenAxes(const DecompositionInput& in) {
  AxisList axes;
  const std::vector<std::vector<int>>& logits = in.rule.operands[kCeLogits].dims;
  for (size_t d = 0; d + 1 < logits.size(); ++d) {
    for (int f : logits[d]) {
      const AxisList& split = in.choice.strategy.factors[f];
      axes.insert(axes.end(), split.begin(), split.end());
    }
  }
  return axes;
}

AttrDict WithReduction(AttrDict attrs, const char* reduction) {
  attrs.Set("reduction", Attribute::Ident(reduction));
  return attrs;
}

// The element type the partial sums and counts travel in: f64 for f64 logits, else f32
// (a count is exact there below 2^24 tokens).
ElementType AccumulatorType(const DecompositionInput& in) {
  return in.global_operand_types[kCeLogits].element_type() == ElementType::kF64 ? ElementType::kF64
                                                                                 : ElementType::kF32;
}

absl::StatusOr<Value*> ConvertTo(OpBuilder& e, Value* x, Type type) {
  if (x->type() == type) return x;
  Type to[] = {type};
  return e.CreateValue(OpKind::kConvert, {x}, {}, to);
}

// This device's count of the tokens whose label is not ignore_index, a scalar of `type`.
absl::StatusOr<Value*> LocalCount(const DecompositionInput& in, ElementType type) {
  OpBuilder& e = in.emitter;
  Value* labels = in.operands[kCeLabels].value;
  const int64_t ignore = CrossEntropyOptionsOf(in.op).ignore_index;
  AttrDict ne;
  ne.Set("cmp", Attribute::Ident("ne"));
  COMMIR_ASSIGN_OR_RETURN(
      Value* kept,
      e.CreateValue(OpKind::kCompare,
                    {labels, Operand::Literal(static_cast<double>(ignore),
                                              Type::Scalar(labels->type().element_type()))},
                    ne));
  COMMIR_ASSIGN_OR_RETURN(Value* ones, ConvertTo(e, kept, labels->type().WithElementType(type)));
  std::vector<int64_t> every_dim;
  for (int64_t d = 0; d < labels->type().rank(); ++d) every_dim.push_back(d);
  AttrDict over;
  over.Set("dims", Attribute::IntList(every_dim));
  COMMIR_ASSIGN_OR_RETURN(Value* count, e.CreateValue(OpKind::kReduceSum, {ones}, over));
  count->set_name("local_count");
  return count;
}

absl::StatusOr<Value*> AllReduce(OpBuilder& e, Value* x, const AxisList& axes) {
  return e.CreateValue(OpKind::kAllReduce, {x}, AxisAttrs(axes));
}

absl::StatusOr<Value*> Reshape(OpBuilder& e, Value* x, std::vector<int64_t> dims) {
  Type to[] = {Type::Tensor(x->type().element_type(), dims)};
  return e.CreateValue(OpKind::kReshape, {x}, {}, to);
}

// Element `i` of a 2-element vector, as a scalar.
absl::StatusOr<Value*> Element(OpBuilder& e, Value* pair, int64_t i) {
  AttrDict attrs;
  attrs.Set("start", Attribute::IntList({i}));
  attrs.Set("size", Attribute::IntList({1}));
  COMMIR_ASSIGN_OR_RETURN(Value* one, e.CreateValue(OpKind::kSlice, {pair}, attrs));
  return Reshape(e, one, {});
}

}  // namespace

DecompositionResult DecomposeCrossEntropy(const DecompositionInput& in) {
  const CrossEntropyOptions options = CrossEntropyOptionsOf(in.op);
  const AxisList tokens = TokenAxes(in);
  if (tokens.empty() || options.reduction == LossReduction::kNone) {
    return DecomposeVocabParallelCrossEntropy(in);
  }
  OpBuilder& e = in.emitter;
  // Each device's sum over its tokens: of the whole rows, or of its share of them where
  // the classes are split (summed over the class axes below, in the same all_reduce).
  const AttrDict sum_attrs = WithReduction(in.op.attrs(), "sum");
  const AxisList& classes = ClassAxes(in);
  Operation* local = nullptr;
  if (classes.empty()) {
    COMMIR_ASSIGN_OR_RETURN(local, e.Create(OpKind::kCrossEntropy,
                                            {in.operands[kCeLogits], in.operands[kCeLabels]},
                                            sum_attrs, {}, 2));
  } else {
    COMMIR_ASSIGN_OR_RETURN(local, EmitVocabParallelLossShare(in, sum_attrs));
  }
  Value* sum = local->result(0);
  sum->set_name("local_loss_sum");
  AxisList every = classes;
  every.insert(every.end(), tokens.begin(), tokens.end());
  // The loss in the op's own type (a vocabulary-parallel share is in f32 for bf16 logits).
  const Type loss_type = in.op.result(0)->type();
  if (options.reduction == LossReduction::kSum) {
    COMMIR_ASSIGN_OR_RETURN(Value* loss, AllReduce(e, sum, every));
    COMMIR_ASSIGN_OR_RETURN(loss, ConvertTo(e, loss, loss_type));
    return std::vector<Value*>{loss, local->result(1)};
  }
  // A mean: [sum, count] in one all_reduce. The count is the same on every class shard,
  // so where the classes are split their shares are summed first, over the class axes
  // alone (the vocabulary-parallel form's own all_reduce), and the pair over the tokens.
  if (!classes.empty()) {
    COMMIR_ASSIGN_OR_RETURN(sum, AllReduce(e, sum, classes));
  }
  const ElementType acc = AccumulatorType(in);
  COMMIR_ASSIGN_OR_RETURN(Value* sum_acc, ConvertTo(e, sum, Type::Scalar(acc)));
  COMMIR_ASSIGN_OR_RETURN(Value* count, LocalCount(in, acc));
  COMMIR_ASSIGN_OR_RETURN(Value* sum1, Reshape(e, sum_acc, {1}));
  COMMIR_ASSIGN_OR_RETURN(Value* count1, Reshape(e, count, {1}));
  AttrDict dim0;
  dim0.Set("dim", Attribute::Int(0));
  COMMIR_ASSIGN_OR_RETURN(Value* pair, e.CreateValue(OpKind::kConcat, {sum1, count1}, dim0));
  COMMIR_ASSIGN_OR_RETURN(Value* total, AllReduce(e, pair, tokens));
  total->set_name("loss_sum_count");
  COMMIR_ASSIGN_OR_RETURN(Value* global_sum, Element(e, total, 0));
  COMMIR_ASSIGN_OR_RETURN(Value* global_count, Element(e, total, 1));
  COMMIR_ASSIGN_OR_RETURN(Value* mean, e.CreateValue(OpKind::kDiv, {global_sum, global_count}));
  COMMIR_ASSIGN_OR_RETURN(Value* loss, ConvertTo(e, mean, loss_type));
  return std::vector<Value*>{loss, local->result(1)};
}

DecompositionResult DecomposeCrossEntropyGrad(const DecompositionInput& in) {
  const AxisList tokens = TokenAxes(in);
  if (tokens.empty() || CrossEntropyOptionsOf(in.op).reduction != LossReduction::kMean) {
    // A sum's rows each get dloss whatever the split; per-token losses are per token.
    return DecomposeVocabParallelCrossEntropyGrad(in);
  }
  OpBuilder& e = in.emitter;
  Value* dloss = in.operands[kCeDloss].value;
  COMMIR_ASSIGN_OR_RETURN(Value* count, LocalCount(in, dloss->type().element_type()));
  COMMIR_ASSIGN_OR_RETURN(Value* global_count, AllReduce(e, count, tokens));
  global_count->set_name("global_count");
  COMMIR_ASSIGN_OR_RETURN(Value* scaled, e.CreateValue(OpKind::kDiv, {dloss, global_count}));
  std::vector<Operand> operands(in.operands.begin(), in.operands.end());
  operands[kCeDloss] = scaled;
  const AttrDict sum_attrs = WithReduction(in.op.attrs(), "sum");
  if (!ClassAxes(in).empty()) {
    COMMIR_ASSIGN_OR_RETURN(Value* grad, EmitVocabParallelLossGrad(in, operands, sum_attrs));
    return std::vector<Value*>{grad};
  }
  COMMIR_ASSIGN_OR_RETURN(Value* grad, e.CreateValue(OpKind::kCrossEntropyGrad, operands, sum_attrs));
  return std::vector<Value*>{grad};
}

}  // namespace commir::sharding
