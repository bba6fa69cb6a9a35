#include "transforms/constant_folding.h"

#include <cmath>
#include <limits>

#include "commir/float16.h"
#include "commir/scalar_math.h"

namespace commir {
namespace {

// An int64 result stored into an integer element type: i32 keeps the low 32 bits (two's
// complement), i1 is nonzero-ness.
int64_t StoreInteger(int64_t value, ElementType type) {
  switch (type) {
    case ElementType::kI32: return static_cast<int32_t>(static_cast<uint32_t>(value));
    case ElementType::kI1: return value != 0 ? 1 : 0;
    default: return value;
  }
}

// A float computed in float stored into f32, f16 or bf16 (one rounding).
double StoreFloat(float value, ElementType type) {
  switch (type) {
    case ElementType::kF16: return HalfBitsToFloat(FloatToHalfBits(value));
    case ElementType::kBF16:
      return BFloat16BitsToFloat(FloatToBFloat16Bits(value));
    default: return value;
  }
}
double StoreFloat(double value, ElementType) { return value; }

// The scalar function `op` computes, when it is elementwise arithmetic the executors run
// (predicates and select produce no number of the operands' type: they are not folded).
std::optional<ElementwiseFn> ArithmeticFn(const OpDef& def, const AttrDict& attrs) {
  if (def.elementwise_fn == nullptr) return std::nullopt;
  ElementwiseFn fn = def.elementwise_fn(attrs);
  if (ElementwiseFnIsPredicate(fn) || ElementwiseFnArity(fn) > 2) return std::nullopt;
  return fn;
}

// The executor's kernels, per compute type T (double for f64, float otherwise).
template <typename T>
T FloatFn(ElementwiseFn fn, T a, T b = T{0}) {
  return scalar_math::ApplyFloat(fn, a, b);
}

// Tensor integer math, wrapping like the executor's kernels; no value where the executor
// reports a run-time error.
std::optional<int64_t> IntegerFn(ElementwiseFn fn, int64_t a, int64_t b = 0) {
  scalar_math::IntegerResult r = scalar_math::ApplyInteger(fn, a, b);
  if (r.fault != scalar_math::IntegerFault::kNone) return std::nullopt;
  return r.value;
}

// `index` math. The interpreter's int64 arithmetic has no defined overflow, so an
// overflowing fold is refused rather than guessed.
std::optional<int64_t> IndexBinary(OpKind kind, int64_t a, int64_t b) {
  int64_t result = 0;
  switch (kind) {
    case OpKind::kAdd:
      if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
      return result;
    case OpKind::kSub:
      if (__builtin_sub_overflow(a, b, &result)) return std::nullopt;
      return result;
    case OpKind::kMul:
      if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
      return result;
    case OpKind::kDiv:
    case OpKind::kRem:
      if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
      return kind == OpKind::kDiv ? scalar_math::FloorDiv(a, b) : scalar_math::FloorRem(a, b);
    default: return std::nullopt;
  }
}

template <typename T>
Scalar FromFloat(T value, ElementType type) {
  return Scalar{StoreFloat(value, type), 0};
}

}  // namespace

bool IsIntegral(Type type) { return type.is_index() || IsIntegerType(type.element_type()); }

Scalar RoundToType(double value, Type type) {
  if (type.is_index()) return Scalar{0, scalar_math::RoundToIntegerSaturating<int64_t>(value)};
  switch (type.element_type()) {
    case ElementType::kF64: return Scalar{value, 0};
    case ElementType::kF32: return Scalar{static_cast<float>(value), 0};
    case ElementType::kF16:
      return Scalar{HalfBitsToFloat(DoubleToHalfBits(value)), 0};
    case ElementType::kBF16:
      return Scalar{BFloat16BitsToFloat(DoubleToBFloat16Bits(value)), 0};
    case ElementType::kI64: return Scalar{0, scalar_math::RoundToIntegerSaturating<int64_t>(value)};
    case ElementType::kI32: return Scalar{0, scalar_math::RoundToIntegerSaturating<int32_t>(value)};
    case ElementType::kI1: return Scalar{0, value != 0.0 ? 1 : 0};
  }
  return Scalar{};
}

std::optional<Scalar> ConstantOf(const Value* value) {
  Type type = value->type();
  if (type.is_null()) return std::nullopt;
  if (value->is_literal()) return RoundToType(value->literal_value(), type);
  if (value->kind() != Value::Kind::kResult) return std::nullopt;
  const Operation* op = value->defining_op();
  if (!op->Is(OpKind::kFull)) return std::nullopt;
  const Attribute* attr = op->attrs().Find("value");
  if (attr == nullptr || !attr->is_number()) return std::nullopt;
  // The interpreter reads an index constant as an integer, exactly.
  if (type.is_index()) {
    if (!attr->is_int()) return std::nullopt;
    return Scalar{0, attr->int_value()};
  }
  return RoundToType(attr->number_value(), type);
}

std::optional<Scalar> FoldUnary(const Operation& op, Type type, Scalar x) {
  if (!type.is_tensor()) return std::nullopt;
  std::optional<ElementwiseFn> fn = ArithmeticFn(op.def(), op.attrs());
  if (!fn || ElementwiseFnArity(*fn) != 1) return std::nullopt;
  ElementType et = type.element_type();
  if (IsIntegerType(et)) {
    std::optional<int64_t> v = IntegerFn(*fn, x.i);
    if (!v) return std::nullopt;
    return Scalar{0, StoreInteger(*v, et)};
  }
  if (et == ElementType::kF64) return FromFloat(FloatFn<double>(*fn, x.f), et);
  return FromFloat(FloatFn<float>(*fn, static_cast<float>(x.f)), et);
}

std::optional<Scalar> FoldBinary(OpKind kind, Type type, Scalar a, Scalar b) {
  if (type.is_index()) {
    std::optional<int64_t> r = IndexBinary(kind, a.i, b.i);
    if (!r) return std::nullopt;
    return Scalar{0, *r};
  }
  // The kind alone names the function only for ops without required attributes (not
  // compare, whose function is its `cmp`).
  const OpDef& def = GetOpDef(kind);
  for (const AttrSpec& spec : def.attrs) {
    if (spec.required) return std::nullopt;
  }
  std::optional<ElementwiseFn> fn = ArithmeticFn(def, AttrDict());
  if (!fn || ElementwiseFnArity(*fn) != 2) return std::nullopt;  // rem is index-only
  ElementType et = type.element_type();
  if (IsIntegerType(et)) {
    std::optional<int64_t> r = IntegerFn(*fn, a.i, b.i);
    if (!r) return std::nullopt;
    return Scalar{0, StoreInteger(*r, et)};
  }
  if (et == ElementType::kF64) return FromFloat(FloatFn<double>(*fn, a.f, b.f), et);
  return FromFloat(FloatFn<float>(*fn, static_cast<float>(a.f), static_cast<float>(b.f)), et);
}

Scalar FoldConvert(Type from, Type to, Scalar x) {
  ElementType target = to.element_type();
  if (IsIntegerType(from.element_type())) {
    if (IsIntegerType(target)) return Scalar{0, StoreInteger(x.i, target)};
    // Constants reach the executor through a double (the `value` attribute), so every
    // integer element here is a double's value (INT64_MAX, from saturation, acts as
    // 2^63 in every target type); going through double is the executor's one rounding.
    return RoundToType(static_cast<double>(x.i), to);
  }
  return RoundToType(x.f, to);
}

std::optional<Attribute> ValueAttribute(Scalar x, Type type) {
  if (type.is_index()) return Attribute::Int(x.i);
  if (!IsIntegerType(type.element_type())) return Attribute::Float(x.f);
  constexpr int64_t kExactInDouble = int64_t{1} << 53;
  if (x.i > kExactInDouble || x.i < -kExactInDouble) return std::nullopt;
  return Attribute::Int(x.i);
}

}  // namespace commir
