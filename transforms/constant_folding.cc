#include "transforms/constant_folding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "commir/float16.h"

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
T Sigmoid(T x) {
  if (x >= T{0}) return T{1} / (T{1} + std::exp(-x));
  const T e = std::exp(x);
  return e / (T{1} + e);
}

template <typename T>
std::optional<T> FloatUnary(const Operation& op, T x) {
  static constexpr T kInvSqrt2 = static_cast<T>(1.0 / std::numbers::sqrt2);
  static constexpr T kSqrt2OverPi = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
  static constexpr T kGeluCubic = static_cast<T>(0.044715);
  switch (op.kind()) {
    case OpKind::kNeg: return -x;
    case OpKind::kAbs: return std::abs(x);
    case OpKind::kExp: return std::exp(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return T{1} / std::sqrt(x);
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kSigmoid: return Sigmoid(x);
    case OpKind::kRelu: return x < T{0} ? T{0} : x;
    case OpKind::kSilu: return x * Sigmoid(x);
    case OpKind::kGelu:
      if (op.EnumAttr("approximate") == "tanh") {
        return x * Sigmoid(T{2} * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      }
      return T{0.5} * x * std::erfc(-x * kInvSqrt2);
    default: return std::nullopt;
  }
}

template <typename T>
T FloatBinary(OpKind kind, T a, T b) {
  constexpr T kNan = std::numeric_limits<T>::quiet_NaN();
  switch (kind) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    case OpKind::kDiv: return a / b;
    case OpKind::kMax: return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b);
    case OpKind::kMin: return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b);
    case OpKind::kPow: return std::pow(a, b);
    default: return kNan;
  }
}

int64_t WrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Floor division and remainder; b != 0 and not (INT64_MIN / -1).
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0) && ((a < 0) != (b < 0)) ? q - 1 : q;
}

// Tensor integer math: wrapping like the executor's kernels.
std::optional<int64_t> IntegerBinary(OpKind kind, int64_t a, int64_t b) {
  switch (kind) {
    case OpKind::kAdd: return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case OpKind::kSub: return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    case OpKind::kMul: return WrappingMul(a, b);
    case OpKind::kDiv:
      if (b == 0) return std::nullopt;
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;
      return FloorDiv(a, b);
    case OpKind::kMax: return std::max(a, b);
    case OpKind::kMin: return std::min(a, b);
    case OpKind::kPow: {
      if (b < 0) return std::nullopt;
      int64_t result = 1;
      for (int64_t base = a, e = b; e > 0; e >>= 1) {
        if (e & 1) result = WrappingMul(result, base);
        base = WrappingMul(base, base);
      }
      return result;
    }
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
    case OpKind::kRem: {
      if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
      int64_t q = FloorDiv(a, b);
      return kind == OpKind::kDiv ? q : a - q * b;
    }
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
      case OpKind::kNeg: v = static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(v)); break;
      case OpKind::kAbs:
        if (v < 0) v = static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(v));
        break;
      case OpKind::kRelu: v = std::max<int64_t>(v, 0); break;
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
