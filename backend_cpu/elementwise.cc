// Elementwise kernels: unary and binary arithmetic, type conversion and constants.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "backend_cpu/compute_values.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

// ---- Unary ------------------------------------------------------------------------------

template <typename T>
T Sigmoid(T x) {
  // Never exponentiates a large positive number, so neither branch overflows.
  if (x >= T{0}) return T{1} / (T{1} + std::exp(-x));
  const T e = std::exp(x);
  return e / (T{1} + e);
}

template <typename T, typename Fn>
void TransformInPlace(std::vector<T>& values, Fn fn) {
  for (T& value : values) value = fn(value);
}

template <typename T>
void ApplyFloatUnary(UnaryOp op, std::vector<T>& values) {
  static constexpr T kInvSqrt2 = static_cast<T>(1.0 / std::numbers::sqrt2);
  static constexpr T kSqrt2OverPi = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
  static constexpr T kGeluCubic = static_cast<T>(0.044715);
  switch (op) {
    case UnaryOp::kNeg: TransformInPlace(values, [](T x) { return -x; }); return;
    case UnaryOp::kAbs: TransformInPlace(values, [](T x) { return std::abs(x); }); return;
    case UnaryOp::kExp: TransformInPlace(values, [](T x) { return std::exp(x); }); return;
    case UnaryOp::kLog: TransformInPlace(values, [](T x) { return std::log(x); }); return;
    case UnaryOp::kSqrt: TransformInPlace(values, [](T x) { return std::sqrt(x); }); return;
    case UnaryOp::kRsqrt: TransformInPlace(values, [](T x) { return T{1} / std::sqrt(x); }); return;
    case UnaryOp::kTanh: TransformInPlace(values, [](T x) { return std::tanh(x); }); return;
    case UnaryOp::kSigmoid: TransformInPlace(values, Sigmoid<T>); return;
    // `x < 0 ? 0 : x` rather than max(x, 0) so that NaN stays NaN.
    case UnaryOp::kRelu: TransformInPlace(values, [](T x) { return x < T{0} ? T{0} : x; }); return;
    case UnaryOp::kSilu: TransformInPlace(values, [](T x) { return x * Sigmoid(x); }); return;
    // The gelu forms are rewritten so that nothing cancels for negative x, where 1 + erf
    // and 1 + tanh approach 0: 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 sigmoid(2u).
    case UnaryOp::kGeluErf:
      TransformInPlace(values, [](T x) { return T{0.5} * x * std::erfc(-x * kInvSqrt2); });
      return;
    case UnaryOp::kGeluTanh:
      TransformInPlace(values, [](T x) {
        return x * Sigmoid(T{2} * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      });
      return;
  }
}

// Two's-complement arithmetic without signed-overflow undefined behaviour.
int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

absl::Status ApplyIntegerUnary(UnaryOp op, const Tensor& x, std::vector<int64_t>& values) {
  switch (op) {
    case UnaryOp::kNeg:
      TransformInPlace(values, [](int64_t v) { return WrappingSub(0, v); });
      return absl::OkStatus();
    case UnaryOp::kAbs:
      TransformInPlace(values, [](int64_t v) { return v < 0 ? WrappingSub(0, v) : v; });
      return absl::OkStatus();
    case UnaryOp::kRelu:
      TransformInPlace(values, [](int64_t v) { return std::max<int64_t>(v, 0); });
      return absl::OkStatus();
    default: return CheckFloatType(UnaryOpName(op), x);
  }
}

// ---- Binary -----------------------------------------------------------------------------

template <typename T>
T ApplyFloatBinary(BinaryOp op, T a, T b) {
  constexpr T kNan = std::numeric_limits<T>::quiet_NaN();
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    // Unlike std::max/min, an unordered comparison must yield NaN, not an operand.
    case BinaryOp::kMax: return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b);
    case BinaryOp::kMin: return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b);
    case BinaryOp::kPow: return std::pow(a, b);
  }
  return T{0};
}

int64_t FloorDivide(int64_t a, int64_t b) {
  // The one overflowing quotient wraps, like the other integer ops.
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;
  const int64_t quotient = a / b;  // truncates toward zero
  const bool inexact = quotient * b != a;
  return inexact && ((a < 0) != (b < 0)) ? quotient - 1 : quotient;
}

int64_t WrappingPower(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = WrappingMul(result, base);
    base = WrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

absl::StatusOr<int64_t> ApplyIntegerBinary(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::kAdd: return WrappingAdd(a, b);
    case BinaryOp::kSub: return WrappingSub(a, b);
    case BinaryOp::kMul: return WrappingMul(a, b);
    case BinaryOp::kDiv:
      if (b == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("div: integer division by zero (%d / 0)", a));
      }
      return FloorDivide(a, b);
    case BinaryOp::kMax: return std::max(a, b);
    case BinaryOp::kMin: return std::min(a, b);
    case BinaryOp::kPow:
      if (b < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "pow: integer %d raised to the negative power %d is not an integer", a, b));
      }
      return WrappingPower(a, b);
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

}  // namespace

std::string_view UnaryOpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kRsqrt: return "rsqrt";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kSilu: return "silu";
    case UnaryOp::kGeluErf:
    case UnaryOp::kGeluTanh: return "gelu";
  }
  return "?";
}

std::string_view BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kMax: return "max";
    case BinaryOp::kMin: return "min";
    case BinaryOp::kPow: return "pow";
  }
  return "?";
}

absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x) {
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

absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::string_view name = BinaryOpName(op);
  if (absl::Status status = CheckSameElementType(name, a, b); !status.ok()) return status;
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(name, a.shape(), b.shape());
  if (!shape.ok()) return shape.status();

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

Tensor Full(ElementType type, absl::Span<const int64_t> shape, double value) {
  Tensor result(type, std::vector<int64_t>(shape.begin(), shape.end()));
  if (result.num_elements() == 0) return result;
  result.SetFromDouble(0, value);
  const int width = ElementTypeByteWidth(type);
  auto* bytes = static_cast<std::byte*>(result.raw_data());
  for (int64_t i = 1; i < result.num_elements(); ++i) std::memcpy(bytes + i * width, bytes, width);
  return result;
}

}  // namespace commir::cpu
