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
};

// How many operands the function takes (1 or 2).
constexpr int ElementwiseFnArity(ElementwiseFn fn) {
  return static_cast<uint8_t>(fn) >= static_cast<uint8_t>(ElementwiseFn::kAdd) ? 2 : 1;
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
  }
  return "?";
}

}  // namespace commir

#endif  // COMMIR_ELEMENTWISE_FN_H_
