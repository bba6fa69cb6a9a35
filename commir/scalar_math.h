// The scalar semantics of the elementwise ops and of index arithmetic (docs/language.md,
// "Elementwise ops" and "Index arithmetic"): one definition of each function, shared by
// constant folding, the interpreter's index arithmetic, the cpu kernels and the cuda
// kernels, so that a folded constant and an executed op agree to the bit.
//
// Floating-point functions take the compute type T (double for f64, float for every other
// float type); their formulas and the order of their operations are part of the result,
// so change them only together with the goldens. The header is also valid CUDA (every
// function is COMMIR_HOST_DEVICE; exp, log, tanh, erfc and pow come from
// deterministic_math.h on the host and from nvcc's std:: math on the device).
// Integer functions use unsigned arithmetic where a signed result could overflow, which
// would be undefined behaviour.
#ifndef COMMIR_SCALAR_MATH_H_
#define COMMIR_SCALAR_MATH_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include "commir/elementwise_fn.h"

#if defined(__CUDACC__)
#define COMMIR_HOST_DEVICE __host__ __device__
// nvcc's device math (the cuda kernels' results are checked against the cpu backend's
// within tolerances, not to the bit).
#define COMMIR_MATH std
#else
#define COMMIR_HOST_DEVICE
// The same bits on every x86-64 CPU (glibc's libm differs in the last bit between CPUs
// with and without FMA): deterministic_math.h.
#include "commir/deterministic_math.h"
#define COMMIR_MATH ::commir::deterministic_math
#endif

namespace commir::scalar_math {

// ---- Integers: two's complement, without signed-overflow undefined behaviour ----------

COMMIR_HOST_DEVICE constexpr int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
COMMIR_HOST_DEVICE constexpr int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
COMMIR_HOST_DEVICE constexpr int64_t WrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
COMMIR_HOST_DEVICE constexpr int64_t WrappingNeg(int64_t v) { return WrappingSub(0, v); }
// |INT64_MIN| wraps to INT64_MIN.
COMMIR_HOST_DEVICE constexpr int64_t WrappingAbs(int64_t v) { return v < 0 ? WrappingNeg(v) : v; }

// base^exponent modulo 2^64 by squaring; exponent >= 0 (a negative power has no integer
// value: callers reject it).
COMMIR_HOST_DEVICE constexpr int64_t WrappingPow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = WrappingMul(result, base);
    base = WrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

// Division rounding toward negative infinity (the `index` div and the integer tensor div). Requires b != 0 and not
// (INT64_MIN / -1), the one quotient that does not fit.
COMMIR_HOST_DEVICE constexpr int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t quotient = a / b;  // truncates toward zero
  // quotient * b cannot overflow (|quotient * b| <= |a|), and a multiply is cheaper than
  // a second division on the GPU, which has no instruction giving both.
  return quotient * b != a && ((a < 0) != (b < 0)) ? quotient - 1 : quotient;
}

// The remainder of FloorDiv: has the sign of b. Requires b != 0; defined for every a,
// including INT64_MIN % -1 (0), whose quotient does not fit.
COMMIR_HOST_DEVICE constexpr int64_t FloorRem(int64_t a, int64_t b) {
  if (b == -1) return 0;  // a % -1 is undefined behaviour for the smallest int64
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;  // cannot overflow: |r| < |b|
  return r;
}

// Tensor integer division: FloorDiv, where the one overflowing quotient (INT64_MIN / -1)
// wraps to INT64_MIN like the other integer ops. Requires b != 0.
COMMIR_HOST_DEVICE constexpr int64_t WrappingFloorDiv(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;
  return FloorDiv(a, b);
}

// ---- Both: comparisons -----------------------------------------------------------------

// `x < 0 ? 0 : x` rather than max(x, 0) so that NaN stays NaN.
template <typename T>
COMMIR_HOST_DEVICE constexpr T Relu(T x) {
  return x < T{0} ? T{0} : x;
}

// Unlike std::max/min, an unordered comparison yields NaN, not an operand. Otherwise the
// std::max/min choice: the first operand when they compare equal (-0 vs +0).
template <typename T>
COMMIR_HOST_DEVICE inline T Max(T a, T b) {
  if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <typename T>
COMMIR_HOST_DEVICE inline T Min(T a, T b) {
  if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return b < a ? b : a;
}

// ---- Floats: T is float or double ------------------------------------------------------

template <typename T>
COMMIR_HOST_DEVICE inline T Neg(T x) { return -x; }
template <typename T>
COMMIR_HOST_DEVICE inline T Abs(T x) { return std::abs(x); }
template <typename T>
COMMIR_HOST_DEVICE inline T Exp(T x) { return COMMIR_MATH::exp(x); }
template <typename T>
COMMIR_HOST_DEVICE inline T Log(T x) { return COMMIR_MATH::log(x); }
template <typename T>
COMMIR_HOST_DEVICE inline T Sqrt(T x) { return std::sqrt(x); }
template <typename T>
COMMIR_HOST_DEVICE inline T Rsqrt(T x) { return T{1} / std::sqrt(x); }
template <typename T>
COMMIR_HOST_DEVICE inline T Tanh(T x) { return COMMIR_MATH::tanh(x); }

template <typename T>
COMMIR_HOST_DEVICE inline T Sigmoid(T x) {
  // Never exponentiates a large positive number, so neither branch overflows.
  if (x >= T{0}) return T{1} / (T{1} + Exp(-x));
  const T e = Exp(x);
  return e / (T{1} + e);
}

template <typename T>
COMMIR_HOST_DEVICE inline T Silu(T x) { return x * Sigmoid(x); }

// The gelu forms are rewritten so that nothing cancels for negative x, where 1 + erf and
// 1 + tanh approach 0: 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 sigmoid(2u).
// 0.5 x (1 + erf(x / sqrt 2))
template <typename T>
COMMIR_HOST_DEVICE inline T GeluErf(T x) {
  constexpr T kInvSqrt2 = static_cast<T>(1.0 / std::numbers::sqrt2);
  return T{0.5} * x * COMMIR_MATH::erfc(-x * kInvSqrt2);
}
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
// Device code must not call this: nvcc contracts the multiply-add into an FMA where the
// host compiler does not, so the cuda kernels spell it out unfused (elementwise.cu).
template <typename T>
COMMIR_HOST_DEVICE inline T GeluTanh(T x) {
  constexpr T kSqrt2OverPi = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
  constexpr T kGeluCubic = static_cast<T>(0.044715);
  return x * Sigmoid(T{2} * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
}

template <typename T>
COMMIR_HOST_DEVICE inline T Add(T a, T b) { return a + b; }
template <typename T>
COMMIR_HOST_DEVICE inline T Sub(T a, T b) { return a - b; }
template <typename T>
COMMIR_HOST_DEVICE inline T Mul(T a, T b) { return a * b; }
template <typename T>
COMMIR_HOST_DEVICE inline T Div(T a, T b) { return a / b; }
template <typename T>
COMMIR_HOST_DEVICE inline T Pow(T a, T b) { return COMMIR_MATH::pow(a, b); }

// Nearest integer, ties to even, independent of the floating-point rounding mode;
// saturates at Int's range and maps NaN to 0 (C++ leaves both cases undefined): every
// float-to-integer rounding of the executors and of constant folding.
template <typename Int>
COMMIR_HOST_DEVICE inline Int RoundToIntegerSaturating(double value) {
  if (std::isnan(value)) return 0;
  double rounded = std::floor(value);
  const double fraction = value - rounded;  // exact for every double
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(rounded, 2.0) != 0.0)) rounded += 1.0;
  // Both limits are powers of two (or one less), so the comparisons against the
  // double values -2^(n-1) and 2^(n-1) are exact.
  constexpr double kUpperBound = -static_cast<double>(std::numeric_limits<Int>::min());
  if (rounded >= kUpperBound) return std::numeric_limits<Int>::max();
  if (rounded < static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  return static_cast<Int>(rounded);
}

// The function `fn` computes, by value: the one run-time dispatch over ElementwiseFn that
// constant folding and the host kernels' integer paths share. (Kernels over whole tensors
// pick their function once per tensor, or at compile time on the device, from the same
// scalar functions above.) `b` is ignored by one-operand functions; functions that are not
// float arithmetic (predicates, select) give NaN.
template <typename T>
COMMIR_HOST_DEVICE inline T ApplyFloat(ElementwiseFn fn, T a, T b = T{0}) {
  switch (fn) {
    case ElementwiseFn::kNeg: return Neg(a);
    case ElementwiseFn::kAbs: return Abs(a);
    case ElementwiseFn::kExp: return Exp(a);
    case ElementwiseFn::kLog: return Log(a);
    case ElementwiseFn::kSqrt: return Sqrt(a);
    case ElementwiseFn::kRsqrt: return Rsqrt(a);
    case ElementwiseFn::kTanh: return Tanh(a);
    case ElementwiseFn::kSigmoid: return Sigmoid(a);
    case ElementwiseFn::kRelu: return Relu(a);
    case ElementwiseFn::kSilu: return Silu(a);
    case ElementwiseFn::kGeluErf: return GeluErf(a);
    case ElementwiseFn::kGeluTanh: return GeluTanh(a);
    case ElementwiseFn::kAdd: return Add(a, b);
    case ElementwiseFn::kSub: return Sub(a, b);
    case ElementwiseFn::kMul: return Mul(a, b);
    case ElementwiseFn::kDiv: return Div(a, b);
    case ElementwiseFn::kMax: return Max(a, b);
    case ElementwiseFn::kMin: return Min(a, b);
    case ElementwiseFn::kPow: return Pow(a, b);
    default: return std::numeric_limits<T>::quiet_NaN();
  }
}

// Why integer arithmetic has no value: the executors report these as run-time errors.
enum class IntegerFault : uint8_t {
  kNone,
  kDivisionByZero,    // div with a zero divisor
  kNegativeExponent,  // pow with a negative exponent (no integer result)
  kFloatOnly,         // a function integers do not have (exp, ...)
};

struct IntegerResult {
  int64_t value = 0;
  IntegerFault fault = IntegerFault::kNone;
};

// Integer tensor math, two's-complement wrapping in int64 (the caller narrows to the
// element type); division floors.
COMMIR_HOST_DEVICE inline IntegerResult ApplyInteger(ElementwiseFn fn, int64_t a, int64_t b = 0) {
  switch (fn) {
    case ElementwiseFn::kNeg: return {WrappingNeg(a)};
    case ElementwiseFn::kAbs: return {WrappingAbs(a)};
    case ElementwiseFn::kRelu: return {Relu(a)};
    case ElementwiseFn::kAdd: return {WrappingAdd(a, b)};
    case ElementwiseFn::kSub: return {WrappingSub(a, b)};
    case ElementwiseFn::kMul: return {WrappingMul(a, b)};
    case ElementwiseFn::kDiv:
      if (b == 0) return {0, IntegerFault::kDivisionByZero};
      return {WrappingFloorDiv(a, b)};
    case ElementwiseFn::kMax: return {Max(a, b)};
    case ElementwiseFn::kMin: return {Min(a, b)};
    case ElementwiseFn::kPow:
      if (b < 0) return {0, IntegerFault::kNegativeExponent};
      return {WrappingPow(a, b)};
    default: return {0, IntegerFault::kFloatOnly};
  }
}

// compare's predicates (`fn` is one of kEq..kGe). The C++ operators give IEEE semantics:
// every comparison with a NaN is false except `ne`, which is true.
template <typename T>
COMMIR_HOST_DEVICE constexpr bool Compare(ElementwiseFn fn, T a, T b) {
  switch (fn) {
    case ElementwiseFn::kEq: return a == b;
    case ElementwiseFn::kNe: return a != b;
    case ElementwiseFn::kLt: return a < b;
    case ElementwiseFn::kLe: return a <= b;
    case ElementwiseFn::kGt: return a > b;
    case ElementwiseFn::kGe: return a >= b;
    default: return false;
  }
}

// select's choice: `a` where the predicate holds, else `b`.
template <typename T>
COMMIR_HOST_DEVICE constexpr T Select(bool cond, T a, T b) { return cond ? a : b; }

}  // namespace commir::scalar_math

#undef COMMIR_MATH

#endif  // COMMIR_SCALAR_MATH_H_
