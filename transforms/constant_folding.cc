#include "transforms/constant_folding.h"

#include <cmath>
#include <limits>

#include "commir/float16.h"
#include "commir/scalar_math.h"

namespace commir {
namespace {

// Nearest integer, ties to even, saturating at Int's range, NaN to 0: the executor's
// float-to-integer rounding (runtime/tensor.cc).
template <typename Int>
int64_t RoundToIntegerSaturating(double value) {
  if (std::isnan(value)) return 0;
  double rounded = std::floor(value);
  const double fraction = value - rounded;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(rounded, 2.0) != 0.0)) rounded += 1.0;
  constexpr double kUpperBound = -static_cast<double>(std::numeric_limits<Int>::min());
  if (rounded >= kUpperBound) return std::numeric_limits<Int>::max();
  if (rounded < static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  return static_cast<Int>(rounded);
}

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

// The executor's kernels, per compute type T (double for f64, float otherwise).
template <typename T>
std::optional<T> FloatUnary(const Operation& op, T x) {
  switch (op.kind()) {
    case OpKind::kNeg: return scalar_math::Neg(x);
    case OpKind::kAbs: return scalar_math::Abs(x);
    case OpKind::kExp: return scalar_math::Exp(x);
    case OpKind::kLog: return scalar_math::Log(x);
    case OpKind::kSqrt: return scalar_math::Sqrt(x);
    case OpKind::kRsqrt: return scalar_math::Rsqrt(x);
    case OpKind::kTanh: return scalar_math::Tanh(x);
    case OpKind::kSigmoid: return scalar_math::Sigmoid(x);
    case OpKind::kRelu: return scalar_math::Relu(x);
    case OpKind::kSilu: return scalar_math::Silu(x);
    case OpKind::kGelu:
      if (op.EnumAttr("approximate") == "tanh") return scalar_math::GeluTanh(x);
      return scalar_math::GeluErf(x);
    default: return std::nullopt;
  }
}

template <typename T>
T FloatBinary(OpKind kind, T a, T b) {
  switch (kind) {
    case OpKind::kAdd: return scalar_math::Add(a, b);
    case OpKind::kSub: return scalar_math::Sub(a, b);
    case OpKind::kMul: return scalar_math::Mul(a, b);
    case OpKind::kDiv: return scalar_math::Div(a, b);
    case OpKind::kMax: return scalar_math::Max(a, b);
    case OpKind::kMin: return scalar_math::Min(a, b);
    case OpKind::kPow: return scalar_math::Pow(a, b);
    default: return std::numeric_limits<T>::quiet_NaN();
  }
}

// Tensor integer math: wrapping like the executor's kernels.
std::optional<int64_t> IntegerBinary(OpKind kind, int64_t a, int64_t b) {
  switch (kind) {
    case OpKind::kAdd: return scalar_math::WrappingAdd(a, b);
    case OpKind::kSub: return scalar_math::WrappingSub(a, b);
    case OpKind::kMul: return scalar_math::WrappingMul(a, b);
    case OpKind::kDiv:
      if (b == 0) return std::nullopt;
      return scalar_math::WrappingFloorDiv(a, b);
    case OpKind::kMax: return scalar_math::Max(a, b);
    case OpKind::kMin: return scalar_math::Min(a, b);
    case OpKind::kPow:
      if (b < 0) return std::nullopt;
      return scalar_math::WrappingPow(a, b);
    default: return std::nullopt;
  }
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
  if (type.is_index()) return Scalar{0, RoundToIntegerSaturating<int64_t>(value)};
  switch (type.element_type()) {
    case ElementType::kF64: return Scalar{value, 0};
    case ElementType::kF32: return Scalar{static_cast<float>(value), 0};
    case ElementType::kF16:
      return Scalar{HalfBitsToFloat(DoubleToHalfBits(value)), 0};
    case ElementType::kBF16:
      return Scalar{BFloat16BitsToFloat(DoubleToBFloat16Bits(value)), 0};
    case ElementType::kI64: return Scalar{0, RoundToIntegerSaturating<int64_t>(value)};
    case ElementType::kI32: return Scalar{0, RoundToIntegerSaturating<int32_t>(value)};
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
  ElementType et = type.element_type();
  if (IsIntegerType(et)) {
    int64_t v = x.i;
    switch (op.kind()) {
      case OpKind::kNeg: v = scalar_math::WrappingNeg(v); break;
      case OpKind::kAbs: v = scalar_math::WrappingAbs(v); break;
      case OpKind::kRelu: v = scalar_math::Relu(v); break;
      default: return std::nullopt;
    }
    return Scalar{0, StoreInteger(v, et)};
  }
  if (et == ElementType::kF64) {
    std::optional<double> r = FloatUnary<double>(op, x.f);
    if (!r) return std::nullopt;
    return FromFloat(*r, et);
  }
  std::optional<float> r = FloatUnary<float>(op, static_cast<float>(x.f));
  if (!r) return std::nullopt;
  return FromFloat(*r, et);
}

std::optional<Scalar> FoldBinary(OpKind kind, Type type, Scalar a, Scalar b) {
  if (type.is_index()) {
    std::optional<int64_t> r = IndexBinary(kind, a.i, b.i);
    if (!r) return std::nullopt;
    return Scalar{0, *r};
  }
  ElementType et = type.element_type();
  if (kind == OpKind::kRem) return std::nullopt;  // index-only
  if (IsIntegerType(et)) {
    std::optional<int64_t> r = IntegerBinary(kind, a.i, b.i);
    if (!r) return std::nullopt;
    return Scalar{0, StoreInteger(*r, et)};
  }
  if (et == ElementType::kF64) return FromFloat(FloatBinary<double>(kind, a.f, b.f), et);
  return FromFloat(
      FloatBinary<float>(kind, static_cast<float>(a.f), static_cast<float>(b.f)), et);
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
