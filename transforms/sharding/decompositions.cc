#include "transforms/sharding/decompositions.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "commir/attention_op.h"
#include "commir/status_macros.h"

namespace commir::sharding {
namespace {

using Operand = OpBuilder::Operand;

AttrDict KeepdimReduceAttrs(int64_t dim) {
  AttrDict attrs;
  attrs.Set("dims", Attribute::IntList({dim}));
  attrs.Set("keepdim", Attribute::Bool(true));
  return attrs;
}

AttrDict ReduceOver(const AxisList& axes, bool max) {
  AttrDict attrs = AxisAttrs(axes);
  if (max) attrs.Set("reduce", Attribute::Ident("max"));
  return attrs;
}

// The element type statistics are computed in: f64 for f64, f32 otherwise (as the
// kernels do).
ElementType ComputeType(ElementType type) {
  return type == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

absl::StatusOr<Value*> Convert(OpBuilder& e, Value* x, ElementType type) {
  if (x->type().element_type() == type) return x;
  Type to[] = {x->type().WithElementType(type)};
  return e.CreateValue(OpKind::kConvert, {x}, {}, to);
}

// The axes the factor of dimension `dim` of operand 0 is split over.
const AxisList& FirstOperandDimAxes(const DecompositionInput& in, int64_t dim) {
  return in.choice.strategy.factors[in.rule.operands[0].dims[dim][0]];
}

DecompositionResult One(Value* value) { return std::vector<Value*>{value}; }

absl::StatusOr<Value*> Softmax(OpBuilder& e, Value* x, int64_t dim, const AxisList& axes) {
  ElementType type = x->type().element_type();
  COMMIR_ASSIGN_OR_RETURN(Value* xf, Convert(e, x, ComputeType(type)));
  COMMIR_ASSIGN_OR_RETURN(Value* local_max,
                          e.CreateValue(OpKind::kReduceMax, {xf}, KeepdimReduceAttrs(dim)));
  COMMIR_ASSIGN_OR_RETURN(Value* row_max,
                          e.CreateValue(OpKind::kAllReduce, {local_max}, ReduceOver(axes, true)));
  COMMIR_ASSIGN_OR_RETURN(Value* shifted, e.CreateValue(OpKind::kSub, {xf, row_max}));
  COMMIR_ASSIGN_OR_RETURN(Value* exps, e.CreateValue(OpKind::kExp, {shifted}));
  COMMIR_ASSIGN_OR_RETURN(Value* local_sum,
                          e.CreateValue(OpKind::kReduceSum, {exps}, KeepdimReduceAttrs(dim)));
  COMMIR_ASSIGN_OR_RETURN(Value* row_sum,
                          e.CreateValue(OpKind::kAllReduce, {local_sum}, ReduceOver(axes, false)));
  COMMIR_ASSIGN_OR_RETURN(Value* y, e.CreateValue(OpKind::kDiv, {exps, row_sum}));
  return Convert(e, y, type);
}

// Two-pass for layer_norm, like the kernel.
absl::StatusOr<Value*> Norm(const DecompositionInput& in, const AxisList& axes) {
  OpBuilder& e = in.emitter;
  const Operation& op = in.op;
  Value* x = in.operands[0].value;
  ElementType type = x->type().element_type();
  ElementType ct = ComputeType(type);
  Type scalar = Type::Scalar(ct);
  int64_t last = x->type().rank() - 1;
  double n = static_cast<double>(in.global_operand_types[0].dims().back());
  bool layer = op.Is(OpKind::kLayerNorm);
  double eps = op.NumberAttr("eps");
  COMMIR_ASSIGN_OR_RETURN(Value* xf, Convert(e, x, ct));
  COMMIR_ASSIGN_OR_RETURN(Value* weight, Convert(e, in.operands[1].value, ct));
  // Row sum of `v` over the whole dim, divided by its global length.
  auto row_mean = [&](Value* v) -> absl::StatusOr<Value*> {
    COMMIR_ASSIGN_OR_RETURN(Value* local, e.CreateValue(OpKind::kReduceSum, {v}, KeepdimReduceAttrs(last)));
    COMMIR_ASSIGN_OR_RETURN(Value* total,
                            e.CreateValue(OpKind::kAllReduce, {local}, ReduceOver(axes, false)));
    return e.CreateValue(OpKind::kDiv, {total, Operand::Literal(n, scalar)});
  };
  Value* centered = xf;
  if (layer) {
    COMMIR_ASSIGN_OR_RETURN(Value* mean, row_mean(xf));
    COMMIR_ASSIGN_OR_RETURN(centered, e.CreateValue(OpKind::kSub, {xf, mean}));
  }
  COMMIR_ASSIGN_OR_RETURN(Value* squares, e.CreateValue(OpKind::kMul, {centered, centered}));
  COMMIR_ASSIGN_OR_RETURN(Value* variance, row_mean(squares));
  COMMIR_ASSIGN_OR_RETURN(Value* shifted,
                          e.CreateValue(OpKind::kAdd, {variance, Operand::Literal(eps, scalar)}));
  COMMIR_ASSIGN_OR_RETURN(Value* inverse, e.CreateValue(OpKind::kRsqrt, {shifted}));
  COMMIR_ASSIGN_OR_RETURN(Value* normalized, e.CreateValue(OpKind::kMul, {centered, inverse}));
  COMMIR_ASSIGN_OR_RETURN(Value* y, e.CreateValue(OpKind::kMul, {normalized, weight}));
  if (layer) {
    COMMIR_ASSIGN_OR_RETURN(Value* bias, Convert(e, in.operands[2].value, ct));
    COMMIR_ASSIGN_OR_RETURN(y, e.CreateValue(OpKind::kAdd, {y, bias}));
  }
  return Convert(e, y, type);
}

}  // namespace

absl::StatusOr<std::vector<Value*>> EmitPerDeviceOp(const DecompositionInput& in, AttrDict attrs) {
  const Operation& op = in.op;
  const Mesh& mesh = *in.emitter.function()->mesh();
  std::vector<Type> annotated;
  if (op.def().Has(kResultTypeRequired) || op.Is(OpKind::kMatmul)) {
    for (int r = 0; r < op.num_results(); ++r) {
      annotated.push_back(LocalTypeOf(op.result(r)->type(), in.choice.results[r], mesh));
    }
  }
  COMMIR_ASSIGN_OR_RETURN(Operation * local,
                          in.emitter.Create(op.kind(), in.operands, std::move(attrs), annotated,
                                            op.num_results()));
  return local->results();
}

DecompositionResult DecomposeSoftmax(const DecompositionInput& in) {
  int64_t dim = in.op.IntAttr("dim");
  if (dim < 0) dim += in.global_operand_types[0].rank();
  const AxisList& axes = FirstOperandDimAxes(in, dim);
  if (axes.empty()) return std::nullopt;
  COMMIR_ASSIGN_OR_RETURN(Value* y, Softmax(in.emitter, in.operands[0].value, dim, axes));
  return One(y);
}

DecompositionResult DecomposeNorm(const DecompositionInput& in) {
  int64_t last = in.global_operand_types[0].rank() - 1;
  const AxisList& axes = FirstOperandDimAxes(in, last);
  if (axes.empty()) return std::nullopt;
  COMMIR_ASSIGN_OR_RETURN(Value* y, Norm(in, axes));
  return One(y);
}

DecompositionResult DecomposeMean(const DecompositionInput& in) {
  bool split = false;
  for (int f = 0; f < in.rule.num_factors(); ++f) {
    split |= in.rule.kinds[f] == FactorKind::kSum && !in.choice.strategy.factors[f].empty();
  }
  if (!split) return std::nullopt;
  OpBuilder& e = in.emitter;
  const Operation& op = in.op;
  COMMIR_ASSIGN_OR_RETURN(Value* sum, e.CreateValue(OpKind::kReduceSum, {in.operands[0]}, op.attrs()));
  Type global = in.global_operand_types[0];
  double count = 1;
  for (int64_t d : op.attrs().Find("dims")->int_list().value_or(std::vector<int64_t>{})) {
    count *= static_cast<double>(global.dims()[d < 0 ? d + global.rank() : d]);
  }
  COMMIR_ASSIGN_OR_RETURN(
      Value* mean,
      e.CreateValue(OpKind::kDiv, {sum, Operand::Literal(count, Type::Scalar(global.element_type()))}));
  return One(mean);
}

// Each device's queries sit at q_pos + rank(axes) * Sq_local, where q_pos is the given
// one or Skv - Sq.
namespace {

// With the query heads split over `axes` and every key/value head on every device
// (AttentionRule's form for tensor parallelism wider than the key/value heads): the
// index of the one key/value head this device's query heads use.
absl::StatusOr<Value*> OwnKeyValueHeadIndex(const DecompositionInput& in, const AxisList& axes) {
  OpBuilder& e = in.emitter;
  int64_t heads = in.global_operand_types[0].dims()[1];
  int64_t kv_heads = in.global_operand_types[1].dims()[1];
  int64_t local_heads = in.operands[0].value->type().dims()[1];
  int64_t group = kv_heads > 0 ? heads / kv_heads : 0;
  if (local_heads <= 0 || group % local_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", local_heads, " query heads of a device do not fall in one of the ", kv_heads,
        " key/value heads"));
  }
  // Devices [c * per, (c + 1) * per) hold the query heads of key/value head c.
  int64_t per = group / local_heads;
  COMMIR_ASSIGN_OR_RETURN(Value* index, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
  if (per == 1) return index;
  return e.CreateValue(OpKind::kDiv, {index, Operand::Literal(static_cast<double>(per), Type::Index())});
}

// The position of this device's first query when attention's (or attention_grad's)
// query sequence (operand 0, dim 2) is split over `axes`: the written q_pos (or the
// default Skv - Sq of the global sizes) plus the device's rank times its local queries.
absl::StatusOr<Value*> LocalQueryPosition(const DecompositionInput& in, const AxisList& axes,
                                          const Operand* written_q_pos) {
  OpBuilder& e = in.emitter;
  int64_t local_queries = in.operands[0].value->type().dims()[2];
  int64_t queries = in.global_operand_types[0].dims()[2];
  int64_t keys = in.global_operand_types[1].dims()[2];
  COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
  Value* offset = rank;
  if (local_queries != 1) {
    COMMIR_ASSIGN_OR_RETURN(
        offset, e.CreateValue(OpKind::kMul, {rank, Operand::Literal(static_cast<double>(local_queries),
                                                               Type::Index())}));
  }
  Value* q_pos = offset;
  if (written_q_pos != nullptr) {
    COMMIR_ASSIGN_OR_RETURN(q_pos, e.CreateValue(OpKind::kAdd, {*written_q_pos, offset}));
  } else if (keys != queries) {
    COMMIR_ASSIGN_OR_RETURN(
        q_pos, e.CreateValue(OpKind::kAdd, {offset, Operand::Literal(static_cast<double>(keys - queries),
                                                                Type::Index())}));
  }
  q_pos->set_name("q_pos");
  return q_pos;
}

}  // namespace

DecompositionResult DecomposeAttentionGrad(const DecompositionInput& in) {
  const Operation& op = in.op;
  const AxisList& axes = FirstOperandDimAxes(in, 2);
  if (axes.empty() || !op.BoolAttr("causal")) return std::nullopt;
  const AttentionGradOp view(op);
  std::vector<Operand> local(in.operands.begin(), in.operands.begin() + AttentionGradOp::kQPos);
  COMMIR_ASSIGN_OR_RETURN(
      Value* q_pos,
      LocalQueryPosition(in, axes, view.q_pos() != nullptr ? &in.operands[AttentionGradOp::kQPos] : nullptr));
  local.push_back(q_pos);
  if (view.k_pos() != nullptr) local.push_back(in.operands[AttentionGradOp::kKPos]);
  COMMIR_ASSIGN_OR_RETURN(Operation * grad,
                          in.emitter.Create(OpKind::kAttentionGrad, local, op.attrs(), {}, op.num_results()));
  return grad->results();
}

DecompositionResult DecomposeAttention(const DecompositionInput& in) {
  const Operation& op = in.op;
  const AxisList& axes = FirstOperandDimAxes(in, 2);
  const std::vector<int>& q_heads = in.rule.operands[0].dims[1];
  const std::vector<int>& kv_heads = in.rule.operands[1].dims[1];
  bool own_kv_head = q_heads.size() == 1 && kv_heads.size() == 1 &&
                     in.rule.kinds[kv_heads[0]] == FactorKind::kReplicate &&
                     !in.choice.strategy.factors[q_heads[0]].empty();
  bool causal_split = !axes.empty() && op.BoolAttr("causal");
  if (!own_kv_head && !causal_split) return std::nullopt;
  OpBuilder& e = in.emitter;
  std::vector<Operand> narrowed(in.operands.begin(), in.operands.end());
  if (own_kv_head) {
    const AxisList& head_axes = in.choice.strategy.factors[q_heads[0]];
    COMMIR_ASSIGN_OR_RETURN(Value* index, OwnKeyValueHeadIndex(in, head_axes));
    index->set_name("kv_head");
    AttrDict one_head;
    one_head.Set("dim", Attribute::Int(1));
    one_head.Set("size", Attribute::Int(1));
    for (int i : {AttentionOp::kK, AttentionOp::kV}) {
      COMMIR_ASSIGN_OR_RETURN(Value* own,
                              e.CreateValue(OpKind::kDynamicSlice, {narrowed[i].value, index}, one_head));
      narrowed[i] = own;
    }
    if (!causal_split) {
      COMMIR_ASSIGN_OR_RETURN(Operation * attention,
                              e.Create(OpKind::kAttention, narrowed, op.attrs(), {}, op.num_results()));
      return attention->results();
    }
  }
  absl::Span<const Operand> operands = narrowed;
  const AttentionOp view(op);
  COMMIR_ASSIGN_OR_RETURN(
      Value* q_pos,
      LocalQueryPosition(in, axes, view.q_pos() != nullptr ? &operands[AttentionOp::kQPos] : nullptr));
  std::vector<Operand> local = {operands[AttentionOp::kQ], operands[AttentionOp::kK],
                                operands[AttentionOp::kV], q_pos};
  if (view.k_pos() != nullptr) local.push_back(operands[AttentionOp::kKPos]);
  COMMIR_ASSIGN_OR_RETURN(Operation * attention,
                          e.Create(OpKind::kAttention, local, op.attrs(), {}, op.num_results()));
  return attention->results();
}

DecompositionResult DecomposeSlice(const DecompositionInput& in) {
  const Mesh& mesh = *in.emitter.function()->mesh();
  AttrDict attrs = in.op.attrs();
  attrs.Set("size",
            Attribute::IntList(LocalTypeOf(in.op.result(0)->type(), in.choice.results[0], mesh).dims()));
  return EmitPerDeviceOp(in, std::move(attrs));
}

DecompositionResult DecomposeReshard(const DecompositionInput& in) {
  return std::vector<Value*>{in.operands[0].value};
}

}  // namespace commir::sharding
