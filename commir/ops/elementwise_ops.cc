// Elementwise ops: unary math, binary math with NumPy broadcasting (and index
// arithmetic in spmd functions), convert and full.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

// Unary ops whose result is linear in the operand keep a `partial` layout (the sum of
// negated addends is the negated sum); nonlinear ones cannot.
bool IsLinearUnary(OpKind kind) { return kind == OpKind::kNeg || kind == OpKind::kConvert; }

bool NeedsFloat(OpKind kind) {
  switch (kind) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kRelu: return false;
    default: return true;
  }
}

template <OpKind kKind>
absl::StatusOr<std::vector<Type>> InferUnary(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (NeedsFloat(kKind)) {
    if (absl::Status s = RequireFloat(*x, "the operand"); !s.ok()) return s;
  }
  if (!sig.in_spmd && !x->partial().empty() && !IsLinearUnary(kKind)) {
    return std::vector<Type>{x->WithSharding(x->dim_axes(), {})};
  }
  return std::vector<Type>{*x};
}

OpCost UnaryCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {static_cast<double>(results[0].num_elements()), StreamingBytes(sig, results), 0};
}

// Which binary ops keep a `partial` layout: a sum of addends stays a sum under
// add/sub of equally partial values, and under scaling by a non-partial factor.
AxisList BinaryPartial(OpKind kind, Type a, Type b) {
  const AxisList& pa = a.partial();
  const AxisList& pb = b.partial();
  switch (kind) {
    case OpKind::kAdd:
    case OpKind::kSub: return pa == pb ? pa : AxisList{};
    case OpKind::kMul:
      if (!pa.empty() && pb.empty()) return pa;
      if (pa.empty() && !pb.empty()) return pb;
      return {};
    case OpKind::kDiv: return pb.empty() ? pa : AxisList{};
    default: return {};
  }
}

// The layout of a broadcast result: each output dimension takes the axes of an operand
// dimension that is not broadcast, the first operand first, never reusing an axis.
std::vector<AxisList> BroadcastDimAxes(const std::vector<int64_t>& out,
                                       std::initializer_list<Type> operands) {
  std::vector<AxisList> axes(out.size());
  absl::flat_hash_set<std::string> used;
  for (Type operand : operands) {
    size_t offset = out.size() - operand.dims().size();
    for (size_t d = 0; d < operand.dims().size(); ++d) {
      const AxisList& candidate = operand.dim_axes()[d];
      if (candidate.empty() || !axes[d + offset].empty()) continue;
      if (operand.dims()[d] != out[d + offset]) continue;
      bool clash = std::any_of(candidate.begin(), candidate.end(),
                               [&](const std::string& axis) { return used.contains(axis); });
      if (clash) continue;
      used.insert(candidate.begin(), candidate.end());
      axes[d + offset] = candidate;
    }
  }
  return axes;
}

template <OpKind kKind>
absl::StatusOr<std::vector<Type>> InferBinary(const OpSignature& sig) {
  Type a = sig.operand_types[0];
  Type b = sig.operand_types[1];
  if (a.is_index() || b.is_index()) {
    if (!a.is_index() || !b.is_index()) {
      return OpError("cannot mix index and tensor operands (%s, %s)", a.ToString(), b.ToString());
    }
    if (kKind != OpKind::kAdd && kKind != OpKind::kSub && kKind != OpKind::kMul &&
        kKind != OpKind::kDiv && kKind != OpKind::kRem) {
      return OpError("index operands support add, sub, mul, div and rem only");
    }
    if (!sig.in_spmd) return OpError("index arithmetic is only valid in spmd functions");
    return std::vector<Type>{Type::Index()};
  }
  if (kKind == OpKind::kRem) return OpError("'rem' takes index operands");
  if (absl::Status s = RequireSameElementType(a, b, "both operands"); !s.ok()) return s;
  if (kKind == OpKind::kPow) {
    if (absl::Status s = RequireFloat(a, "the operands"); !s.ok()) return s;
  }
  // Fast path for the common case, with the same result as the general one: with no
  // layout on either operand and one operand's shape being the result's (equal types,
  // or a rank-0 partner such as a literal, which broadcasts to anything), the general
  // path builds exactly that operand's type (no axes or partial sums to combine).
  if (!a.has_sharding() && !b.has_sharding()) {
    if (a == b || b.rank() == 0) return std::vector<Type>{a};
    if (a.rank() == 0) return std::vector<Type>{b};
  }
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(a.dims(), b.dims());
  if (!shape.ok()) return shape.status();
  if (sig.in_spmd) return std::vector<Type>{Type::Tensor(a.element_type(), *shape)};
  std::vector<AxisList> dim_axes = BroadcastDimAxes(*shape, {a, b});
  AxisList partial = BinaryPartial(kKind, a, b);
  // A partial axis cannot also split a dimension.
  for (const AxisList& axes : dim_axes) {
    for (const std::string& axis : axes) {
      if (std::find(partial.begin(), partial.end(), axis) != partial.end()) partial.clear();
    }
  }
  return std::vector<Type>{
      Type::Tensor(a.element_type(), *std::move(shape), std::move(dim_axes), std::move(partial))};
}

// compare: a broadcasting binary op on tensors whose result is an i1 predicate. A
// comparison of addends says nothing about their sum, so no `partial` survives.
absl::StatusOr<std::vector<Type>> InferCompare(const OpSignature& sig) {
  if (sig.operand_types[0].is_index() || sig.operand_types[1].is_index()) {
    return OpError("'compare' takes tensor operands");
  }
  absl::StatusOr<std::vector<Type>> result = InferBinary<OpKind::kCompare>(sig);
  if (!result.ok()) return result.status();
  Type predicate = (*result)[0].WithElementType(ElementType::kI1);
  return std::vector<Type>{predicate.WithSharding(predicate.dim_axes(), {})};
}

// select(cond, a, b): cond an i1 predicate, a and b of one element type, all three
// broadcast together (NumPy); the result has a's element type and no `partial` (which
// addend is chosen differs per device).
absl::StatusOr<std::vector<Type>> InferSelect(const OpSignature& sig) {
  absl::StatusOr<Type> cond = TensorOperand(sig, 0, "the condition");
  if (!cond.ok()) return cond.status();
  absl::StatusOr<Type> a = TensorOperand(sig, 1, "the first choice");
  if (!a.ok()) return a.status();
  absl::StatusOr<Type> b = TensorOperand(sig, 2, "the second choice");
  if (!b.ok()) return b.status();
  if (cond->element_type() != ElementType::kI1) {
    return OpError("the condition must be an i1 predicate, got %s", cond->ToString());
  }
  if (absl::Status s = RequireSameElementType(*a, *b, "both choices"); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> ab = BroadcastShapes(a->dims(), b->dims());
  if (!ab.ok()) return ab.status();
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(cond->dims(), *ab);
  if (!shape.ok()) return shape.status();
  if (sig.in_spmd) return std::vector<Type>{Type::Tensor(a->element_type(), *shape)};
  std::vector<AxisList> dim_axes = BroadcastDimAxes(*shape, {*cond, *a, *b});
  return std::vector<Type>{
      Type::Tensor(a->element_type(), *std::move(shape), std::move(dim_axes), AxisList{})};
}

absl::StatusOr<std::vector<Type>> InferConvert(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> result = AnnotatedResult(sig);
  if (!result.ok()) return result.status();
  if (!result->is_tensor() || result->dims() != x->dims()) {
    return OpError("convert keeps the shape: %s cannot become %s", x->ToString(),
                   result->ToString());
  }
  return std::vector<Type>{*result};
}

absl::StatusOr<std::vector<Type>> InferFull(const OpSignature& sig) {
  absl::StatusOr<Type> result = AnnotatedResult(sig);
  if (!result.ok()) return result.status();
  const Attribute* value = sig.attrs.Find("value");
  if (result->is_index() && !value->is_int()) {
    return OpError("an index constant needs an integer value, got %s", value->ToString());
  }
  if (result->is_tensor() && !result->partial().empty()) {
    return OpError("a constant cannot be partial");
  }
  return std::vector<Type>{*result};
}

OpCost FullCost(const OpSignature&, absl::Span<const Type> results) {
  return {0, ByteSize(results[0]), 0};
}

// OpDef::elementwise_fn of an op that always computes `kFn`.
template <ElementwiseFn kFn>
ElementwiseFn Computes(const AttrDict&) {
  return kFn;
}

ElementwiseFn GeluFn(const AttrDict& attrs) {
  return GetOpDef(OpKind::kGelu).EnumAttr(attrs, "approximate") == "tanh"
             ? ElementwiseFn::kGeluTanh
             : ElementwiseFn::kGeluErf;
}

// compare's predicate, from its `cmp` attribute.
ElementwiseFn CompareFn(const AttrDict& attrs) {
  const std::string& cmp = GetOpDef(OpKind::kCompare).RequiredEnumAttr(attrs, "cmp");
  if (cmp == "eq") return ElementwiseFn::kEq;
  if (cmp == "ne") return ElementwiseFn::kNe;
  if (cmp == "lt") return ElementwiseFn::kLt;
  if (cmp == "le") return ElementwiseFn::kLe;
  if (cmp == "gt") return ElementwiseFn::kGt;
  return ElementwiseFn::kGe;
}

using ElementwiseFnHook = ElementwiseFn (*)(const AttrDict&);

OpDef Unary(OpKind kind, absl::string_view name, absl::string_view summary,
            absl::StatusOr<std::vector<Type>> (*infer)(const OpSignature&),
            ElementwiseFnHook fn, std::vector<AttrSpec> attrs = {}) {
  return OpDef{
      .kind = kind,
      .name = name,
      .summary = summary,
      .min_operands = 1,
      .max_operands = 1,
      .attrs = std::move(attrs),
      .traits = kElementwise,
      .infer = infer,
      .cost = UnaryCost,
      .elementwise_fn = fn,
      .vjp = ElementwiseVjpRule(kind),
  };
}

OpDef Binary(OpKind kind, absl::string_view name, absl::string_view summary,
             absl::StatusOr<std::vector<Type>> (*infer)(const OpSignature&),
             ElementwiseFnHook fn, uint32_t extra = 0) {
  return OpDef{
      .kind = kind,
      .name = name,
      .summary = summary,
      .min_operands = 2,
      .max_operands = 2,
      .traits = kElementwise | kAllowsLiteral | kIndexOperands | extra,
      .infer = infer,
      .cost = UnaryCost,
      .elementwise_fn = fn,
      .vjp = ElementwiseVjpRule(kind),
  };
}

}  // namespace

void AppendElementwiseOps(std::vector<OpDef>& ops) {
  ops.push_back(Unary(OpKind::kNeg, "neg", "-x", InferUnary<OpKind::kNeg>,
                      Computes<ElementwiseFn::kNeg>));
  ops.push_back(Unary(OpKind::kAbs, "abs", "|x|", InferUnary<OpKind::kAbs>,
                      Computes<ElementwiseFn::kAbs>));
  ops.push_back(Unary(OpKind::kExp, "exp", "e^x", InferUnary<OpKind::kExp>,
                      Computes<ElementwiseFn::kExp>));
  ops.push_back(Unary(OpKind::kLog, "log", "natural logarithm", InferUnary<OpKind::kLog>,
                      Computes<ElementwiseFn::kLog>));
  ops.push_back(Unary(OpKind::kSqrt, "sqrt", "square root", InferUnary<OpKind::kSqrt>,
                      Computes<ElementwiseFn::kSqrt>));
  ops.push_back(Unary(OpKind::kRsqrt, "rsqrt", "1/sqrt(x)", InferUnary<OpKind::kRsqrt>,
                      Computes<ElementwiseFn::kRsqrt>));
  ops.push_back(Unary(OpKind::kTanh, "tanh", "hyperbolic tangent", InferUnary<OpKind::kTanh>,
                      Computes<ElementwiseFn::kTanh>));
  ops.push_back(Unary(OpKind::kSigmoid, "sigmoid", "1/(1+e^-x)", InferUnary<OpKind::kSigmoid>,
                      Computes<ElementwiseFn::kSigmoid>));
  ops.push_back(Unary(OpKind::kRelu, "relu", "max(x, 0)", InferUnary<OpKind::kRelu>,
                      Computes<ElementwiseFn::kRelu>));
  ops.push_back(Unary(OpKind::kSilu, "silu", "x*sigmoid(x)", InferUnary<OpKind::kSilu>,
                      Computes<ElementwiseFn::kSilu>));
  ops.push_back(Unary(OpKind::kGelu, "gelu", "GELU, erf form or tanh approximation",
                      InferUnary<OpKind::kGelu>, GeluFn,
                      {{.name = "approximate",
                        .kind = AttrKind::kEnum,
                        .enum_values = {"none", "tanh"},
                        .default_value = Attribute::Ident("none")}}));
  OpDef convert = Unary(OpKind::kConvert, "convert",
                        "element type change, round to nearest even", InferConvert,
                        /*fn=*/nullptr);
  convert.traits |= kResultTypeRequired;
  ops.push_back(std::move(convert));

  ops.push_back(Binary(OpKind::kAdd, "add", "a + b", InferBinary<OpKind::kAdd>,
                       Computes<ElementwiseFn::kAdd>, kCommutative));
  ops.push_back(Binary(OpKind::kSub, "sub", "a - b", InferBinary<OpKind::kSub>,
                       Computes<ElementwiseFn::kSub>));
  ops.push_back(Binary(OpKind::kMul, "mul", "a * b", InferBinary<OpKind::kMul>,
                       Computes<ElementwiseFn::kMul>, kCommutative));
  ops.push_back(Binary(OpKind::kDiv, "div", "a / b (floor division on index)",
                       InferBinary<OpKind::kDiv>, Computes<ElementwiseFn::kDiv>));
  ops.push_back(Binary(OpKind::kMax, "max", "elementwise maximum", InferBinary<OpKind::kMax>,
                       Computes<ElementwiseFn::kMax>, kCommutative));
  ops.push_back(Binary(OpKind::kMin, "min", "elementwise minimum", InferBinary<OpKind::kMin>,
                       Computes<ElementwiseFn::kMin>, kCommutative));
  ops.push_back(Binary(OpKind::kPow, "pow", "a ^ b", InferBinary<OpKind::kPow>,
                       Computes<ElementwiseFn::kPow>));
  ops.push_back(Binary(OpKind::kRem, "rem", "index remainder, floor semantics",
                       InferBinary<OpKind::kRem>, /*fn=*/nullptr, kSpmdOnly));

  ops.push_back(OpDef{
      .kind = OpKind::kCompare,
      .name = "compare",
      .summary = "elementwise comparison a cmp b, an i1 predicate",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {{.name = "cmp",
                 .kind = AttrKind::kEnum,
                 .required = true,
                 .enum_values = {"eq", "ne", "lt", "le", "gt", "ge"}}},
      .traits = kElementwise | kAllowsLiteral,
      .infer = InferCompare,
      .cost = UnaryCost,
      .elementwise_fn = CompareFn,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kSelect,
      .name = "select",
      .summary = "cond ? a : b elementwise, with broadcasting",
      .min_operands = 3,
      .max_operands = 3,
      .traits = kElementwise,
      .infer = InferSelect,
      .cost = UnaryCost,
      .elementwise_fn = Computes<ElementwiseFn::kSelect>,
      .vjp = ElementwiseVjpRule(OpKind::kSelect),
  });

  ops.push_back(OpDef{
      .kind = OpKind::kFull,
      .name = "full",
      .summary = "constant tensor or index constant",
      .min_operands = 0,
      .max_operands = 0,
      .attrs = {{.name = "value", .kind = AttrKind::kNumber, .required = true}},
      .traits = kResultTypeRequired,
      .infer = InferFull,
      .cost = FullCost,
  });
}

}  // namespace commir::ops
