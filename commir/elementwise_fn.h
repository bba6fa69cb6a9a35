// The scalar functions the elementwise ops compute: one enumeration shared by the op
// definitions (OpDef::elementwise_fn says which function an op computes), the cpu
// kernels and the cuda kernels, so that no backend maps op kinds to functions itself.
// The functions' semantics live in commir/scalar_math.h.
//
// Plain C++ without Abseil: nvcc compiles the .cu files that include it.
#ifndef COMMIR_ELEMENTWISE_FN_H_
#define COMMIR_ELEMENTWISE_FN_H_

#include <cstdint>
#include <string_view>

namespace commir {

enum class ElementwiseFn : uint8_t {
  // One operand.
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kSilu,
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  // Two operands (NumPy broadcasting).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  // Two operands, an i1 predicate result (compare's `cmp`; IEEE: NaN compares unequal).
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // Three operands: select(cond, a, b) = cond ? a : b, with cond an i1 predicate.
  kSelect,
};

// How many operands the function takes (1, 2 or 3).
constexpr int ElementwiseFnArity(ElementwiseFn fn) {
  if (fn == ElementwiseFn::kSelect) return 3;
  return static_cast<uint8_t>(fn) >= static_cast<uint8_t>(ElementwiseFn::kAdd) ? 2 : 1;
}

// Whether the function yields an i1 predicate rather than its operands' element type.
constexpr bool ElementwiseFnIsPredicate(ElementwiseFn fn) {
  return static_cast<uint8_t>(fn) >= static_cast<uint8_t>(ElementwiseFn::kEq) &&
         static_cast<uint8_t>(fn) <= static_cast<uint8_t>(ElementwiseFn::kGe);
}

// The CommIR spelling of the op computing `fn` ("gelu" for both gelu forms), for messages.
constexpr std::string_view ElementwiseFnName(ElementwiseFn fn) {
  switch (fn) {
    case ElementwiseFn::kNeg: return "neg";
    case ElementwiseFn::kAbs: return "abs";
    case ElementwiseFn::kExp: return "exp";
    case ElementwiseFn::kLog: return "log";
    case ElementwiseFn::kSqrt: return "sqrt";
    case ElementwiseFn::kRsqrt: return "rsqrt";
    case ElementwiseFn::kTanh: return "tanh";
    case ElementwiseFn::kSigmoid: return "sigmoid";
    case ElementwiseFn::kRelu: return "relu";
    case ElementwiseFn::kSilu: return "silu";
    case ElementwiseFn::kGeluErf:
    case ElementwiseFn::kGeluTanh: return "gelu";
    case ElementwiseFn::kAdd: return "add";
    case ElementwiseFn::kSub: return "sub";
    case ElementwiseFn::kMul: return "mul";
    case ElementwiseFn::kDiv: return "div";
    case ElementwiseFn::kMax: return "max";
    case ElementwiseFn::kMin: return "min";
    case ElementwiseFn::kPow: return "pow";
    case ElementwiseFn::kEq:
    case ElementwiseFn::kNe:
    case ElementwiseFn::kLt:
    case ElementwiseFn::kLe:
    case ElementwiseFn::kGt:
    case ElementwiseFn::kGe: return "compare";
    case ElementwiseFn::kSelect: return "select";
  }
  return "?";
}

}  // namespace commir

#endif  // COMMIR_ELEMENTWISE_FN_H_
