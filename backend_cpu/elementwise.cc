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
void ApplyFloatUnary(UnaryOp op, std::vector<T>& values) {
  switch (op) {
    case UnaryOp::kNeg:
      TransformInPlace(values, [](T x) { return scalar_math::Neg(x); });
      return;
    case UnaryOp::kAbs:
      TransformInPlace(values, [](T x) { return scalar_math::Abs(x); });
      return;
    case UnaryOp::kExp:
      TransformInPlace(values, [](T x) { return scalar_math::Exp(x); });
      return;
    case UnaryOp::kLog:
      TransformInPlace(values, [](T x) { return scalar_math::Log(x); });
      return;
    case UnaryOp::kSqrt:
      TransformInPlace(values, [](T x) { return scalar_math::Sqrt(x); });
      return;
    case UnaryOp::kRsqrt:
      TransformInPlace(values, [](T x) { return scalar_math::Rsqrt(x); });
      return;
    case UnaryOp::kTanh:
      TransformInPlace(values, [](T x) { return scalar_math::Tanh(x); });
      return;
    case UnaryOp::kSigmoid:
      TransformInPlace(values, [](T x) { return scalar_math::Sigmoid(x); });
      return;
    case UnaryOp::kRelu:
      TransformInPlace(values, [](T x) { return scalar_math::Relu(x); });
      return;
    case UnaryOp::kSilu:
      TransformInPlace(values, [](T x) { return scalar_math::Silu(x); });
      return;
    case UnaryOp::kGeluErf:
      TransformInPlace(values, [](T x) { return scalar_math::GeluErf(x); });
      return;
    case UnaryOp::kGeluTanh:
      TransformInPlace(values, [](T x) { return scalar_math::GeluTanh(x); });
      return;
  }
}

absl::Status ApplyIntegerUnary(UnaryOp op, const Tensor& x, std::vector<int64_t>& values) {
  switch (op) {
    case UnaryOp::kNeg:
      TransformInPlace(values, [](int64_t v) { return scalar_math::WrappingNeg(v); });
      return absl::OkStatus();
    case UnaryOp::kAbs:
      TransformInPlace(values, [](int64_t v) { return scalar_math::WrappingAbs(v); });
      return absl::OkStatus();
    case UnaryOp::kRelu:
      TransformInPlace(values, [](int64_t v) { return scalar_math::Relu(v); });
      return absl::OkStatus();
    default: return CheckFloatType(UnaryOpName(op), x);
  }
}

// ---- Binary -----------------------------------------------------------------------------

template <typename T>
T ApplyFloatBinary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kAdd: return scalar_math::Add(a, b);
    case BinaryOp::kSub: return scalar_math::Sub(a, b);
    case BinaryOp::kMul: return scalar_math::Mul(a, b);
    case BinaryOp::kDiv: return scalar_math::Div(a, b);
    case BinaryOp::kMax: return scalar_math::Max(a, b);
    case BinaryOp::kMin: return scalar_math::Min(a, b);
    case BinaryOp::kPow: return scalar_math::Pow(a, b);
  }
  return T{0};
}

absl::StatusOr<int64_t> ApplyIntegerBinary(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::kAdd: return scalar_math::WrappingAdd(a, b);
    case BinaryOp::kSub: return scalar_math::WrappingSub(a, b);
    case BinaryOp::kMul: return scalar_math::WrappingMul(a, b);
    case BinaryOp::kDiv:
      if (b == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("div: integer division by zero (%d / 0)", a));
      }
      return scalar_math::WrappingFloorDiv(a, b);
    case BinaryOp::kMax: return scalar_math::Max(a, b);
    case BinaryOp::kMin: return scalar_math::Min(a, b);
    case BinaryOp::kPow:
      if (b < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "pow: integer %d raised to the negative power %d is not an integer", a, b));
      }
      return scalar_math::WrappingPow(a, b);
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

}  // namespace commir::cpu
