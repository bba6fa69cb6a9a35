// Elementwise kernels: unary and binary arithmetic, type conversion and constants.
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "commir/scalar_math.h"
#include "runtime/compute_values.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

// ---- Unary ------------------------------------------------------------------------------

template <typename T, typename Fn>
void TransformInPlace(std::vector<T>& values, Fn fn) {
  for (T& value : values) value = fn(value);
}

template <typename T>
void ApplyFloatUnary(ElementwiseFn op, std::vector<T>& values) {
  switch (op) {
    case ElementwiseFn::kNeg:
      TransformInPlace(values, [](T x) { return scalar_math::Neg(x); });
      return;
    case ElementwiseFn::kAbs:
      TransformInPlace(values, [](T x) { return scalar_math::Abs(x); });
      return;
    case ElementwiseFn::kExp:
      TransformInPlace(values, [](T x) { return scalar_math::Exp(x); });
      return;
    case ElementwiseFn::kLog:
      TransformInPlace(values, [](T x) { return scalar_math::Log(x); });
      return;
    case ElementwiseFn::kSqrt:
      TransformInPlace(values, [](T x) { return scalar_math::Sqrt(x); });
      return;
    case ElementwiseFn::kRsqrt:
      TransformInPlace(values, [](T x) { return scalar_math::Rsqrt(x); });
      return;
    case ElementwiseFn::kTanh:
      TransformInPlace(values, [](T x) { return scalar_math::Tanh(x); });
      return;
    case ElementwiseFn::kSigmoid:
      TransformInPlace(values, [](T x) { return scalar_math::Sigmoid(x); });
      return;
    case ElementwiseFn::kRelu:
      TransformInPlace(values, [](T x) { return scalar_math::Relu(x); });
      return;
    case ElementwiseFn::kSilu:
      TransformInPlace(values, [](T x) { return scalar_math::Silu(x); });
      return;
    case ElementwiseFn::kGeluErf:
      TransformInPlace(values, [](T x) { return scalar_math::GeluErf(x); });
      return;
    case ElementwiseFn::kGeluTanh:
      TransformInPlace(values, [](T x) { return scalar_math::GeluTanh(x); });
      return;
    default: return;  // two-operand functions: Unary rejects them first
  }
}

absl::Status ApplyIntegerUnary(ElementwiseFn op, const Tensor& x, std::vector<int64_t>& values) {
  for (int64_t& value : values) {
    scalar_math::IntegerResult r = scalar_math::ApplyInteger(op, value);
    if (r.fault != scalar_math::IntegerFault::kNone) return CheckFloatType(ElementwiseFnName(op), x);
    value = r.value;
  }
  return absl::OkStatus();
}

// ---- Binary -----------------------------------------------------------------------------

template <typename T>
T ApplyFloatBinary(ElementwiseFn op, T a, T b) {
  switch (op) {
    case ElementwiseFn::kAdd: return scalar_math::Add(a, b);
    case ElementwiseFn::kSub: return scalar_math::Sub(a, b);
    case ElementwiseFn::kMul: return scalar_math::Mul(a, b);
    case ElementwiseFn::kDiv: return scalar_math::Div(a, b);
    case ElementwiseFn::kMax: return scalar_math::Max(a, b);
    case ElementwiseFn::kMin: return scalar_math::Min(a, b);
    case ElementwiseFn::kPow: return scalar_math::Pow(a, b);
    default: break;  // one-operand functions: Binary rejects them first
  }
  return T{0};
}

// Integer arithmetic wraps; a division by zero or a negative power is an error.
absl::StatusOr<int64_t> ApplyIntegerBinary(ElementwiseFn op, int64_t a, int64_t b) {
  scalar_math::IntegerResult r = scalar_math::ApplyInteger(op, a, b);
  switch (r.fault) {
    case scalar_math::IntegerFault::kNone: return r.value;
    case scalar_math::IntegerFault::kDivisionByZero:
      return absl::InvalidArgumentError(
          absl::StrFormat("div: integer division by zero (%d / 0)", a));
    case scalar_math::IntegerFault::kNegativeExponent:
      return absl::InvalidArgumentError(absl::StrFormat(
          "pow: integer %d raised to the negative power %d is not an integer", a, b));
    case scalar_math::IntegerFault::kFloatOnly: break;  // Binary's arity check comes first
  }
  return 0;
}

// x's elements as T, broadcast to `shape` (already checked to be a valid broadcast), so
// binary arithmetic is a plain zip over equal shapes.
template <typename T>
std::vector<T> LoadBroadcast(const Tensor& x, const std::vector<int64_t>& shape) {
  if (x.shape() == shape) return LoadAs<T>(x);
  return LoadAs<T>(*Broadcast(x, shape));
}

// An error for a function of the wrong arity: the kernel tables never pass one, but the
// kernels are a public API.
absl::Status CheckArity(ElementwiseFn fn, int arity) {
  if (ElementwiseFnArity(fn) == arity) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "'%s' takes %d operand(s), not %d", ElementwiseFnName(fn), ElementwiseFnArity(fn), arity));
}

// compare: each pair compared in the operands' compute type (exact for every element
// type: f16/bf16/f32 widen to f32 exactly, integers to i64), the outcome stored as i1.
Tensor Predicate(ElementwiseFn fn, const Tensor& a, const Tensor& b, std::vector<int64_t> shape) {
  Tensor result(ElementType::kI1, std::move(shape));
  uint8_t* out = result.data<uint8_t>();
  auto compare = [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> lhs = LoadBroadcast<T>(a, result.shape());
    const std::vector<T> rhs = LoadBroadcast<T>(b, result.shape());
    for (size_t i = 0; i < lhs.size(); ++i) out[i] = scalar_math::Compare(fn, lhs[i], rhs[i]);
  };
  if (IsIntegerType(a.element_type())) {
    compare(int64_t{0});
  } else if (a.element_type() == ElementType::kF64) {
    compare(double{0});
  } else {
    compare(float{0});
  }
  return result;
}

}  // namespace

absl::StatusOr<Tensor> Unary(ElementwiseFn op, const Tensor& x) {
  if (absl::Status status = CheckArity(op, 1); !status.ok()) return status;
  if (IsIntegerType(x.element_type())) {
    std::vector<int64_t> values = x.ToInt64();
    if (absl::Status status = ApplyIntegerUnary(op, x, values); !status.ok()) return status;
    return Tensor::FromInt64(x.element_type(), x.shape(), values);
  }
  return DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values = LoadAs<T>(x);
    ApplyFloatUnary(op, values);
    return StoreAs<T>(x.element_type(), x.shape(), values);
  });
}

absl::StatusOr<Tensor> Binary(ElementwiseFn op, const Tensor& a, const Tensor& b) {
  if (absl::Status status = CheckArity(op, 2); !status.ok()) return status;
  const std::string_view name = ElementwiseFnName(op);
  if (absl::Status status = CheckSameElementType(name, a, b); !status.ok()) return status;
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(name, a.shape(), b.shape());
  if (!shape.ok()) return shape.status();

  if (ElementwiseFnIsPredicate(op)) return Predicate(op, a, b, *std::move(shape));
  if (IsIntegerType(a.element_type())) {
    std::vector<int64_t> lhs = LoadBroadcast<int64_t>(a, *shape);
    const std::vector<int64_t> rhs = LoadBroadcast<int64_t>(b, *shape);
    for (size_t i = 0; i < lhs.size(); ++i) {
      absl::StatusOr<int64_t> value = ApplyIntegerBinary(op, lhs[i], rhs[i]);
      if (!value.ok()) return value.status();
      lhs[i] = *value;
    }
    return Tensor::FromInt64(a.element_type(), *std::move(shape), lhs);
  }
  return DispatchFloatCompute(a.element_type(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> lhs = LoadBroadcast<T>(a, *shape);
    const std::vector<T> rhs = LoadBroadcast<T>(b, *shape);
    for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = ApplyFloatBinary(op, lhs[i], rhs[i]);
    return StoreAs<T>(a.element_type(), *shape, lhs);
  });
}

Tensor Convert(const Tensor& x, ElementType type) {
  if (x.element_type() == type) return x;
  // Integers travel as i64 and floats as f64: both hold every source value exactly, so
  // the only rounding is the one into `type`.
  if (IsIntegerType(x.element_type())) return Tensor::FromInt64(type, x.shape(), x.ToInt64());
  return Tensor::FromDouble(type, x.shape(), x.ToDouble());
}

absl::StatusOr<Tensor> Ternary(ElementwiseFn op, const Tensor& cond, const Tensor& a,
                               const Tensor& b) {
  if (absl::Status status = CheckArity(op, 3); !status.ok()) return status;
  const std::string_view name = ElementwiseFnName(op);
  if (cond.element_type() != ElementType::kI1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the condition must be an i1 tensor, got %s", name, cond.DebugTypeString()));
  }
  if (absl::Status status = CheckSameElementType(name, a, b); !status.ok()) return status;
  absl::StatusOr<std::vector<int64_t>> ab = BroadcastShapes(name, a.shape(), b.shape());
  if (!ab.ok()) return ab.status();
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(name, cond.shape(), *ab);
  if (!shape.ok()) return shape.status();
  // Each element is copied from its source bytes: no rounding, NaN payloads kept.
  const Tensor conds = cond.shape() == *shape ? cond : *Broadcast(cond, *shape);
  const Tensor lhs = a.shape() == *shape ? a : *Broadcast(a, *shape);
  const Tensor rhs = b.shape() == *shape ? b : *Broadcast(b, *shape);
  Tensor result(a.element_type(), *std::move(shape));
  const int width = ElementTypeByteWidth(a.element_type());
  const uint8_t* c = conds.data<uint8_t>();
  const auto* from_a = static_cast<const std::byte*>(lhs.raw_data());
  const auto* from_b = static_cast<const std::byte*>(rhs.raw_data());
  auto* out = static_cast<std::byte*>(result.raw_data());
  for (int64_t i = 0; i < result.num_elements(); ++i) {
    std::memcpy(out + i * width, scalar_math::Select(c[i] != 0, from_a, from_b) + i * width, width);
  }
  return result;
}

}  // namespace commir::cpu
