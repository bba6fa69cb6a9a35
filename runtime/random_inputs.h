// Deterministic random inputs for commir-run (the commir-run contract: "uniform in [-1, 1), from
// the seed, rounded to the element type, and the same global values whatever the
// backend or device count").
//
// Element e (row-major flat index in the global tensor) of argument a is a pure
// function of (seed, a, e): a counter-based generator, so any device can produce any
// slice of any argument on its own and the values never depend on how a tensor is
// split, on the order elements are produced, or on the tensor's shape.
//
// The generator is SplitMix64 used as a counter: argument a gets the stream key
// Mix64(Mix64(seed) + (a + 1) * golden), and element e is Mix64(key + (e + 1) * golden),
// i.e. the e-th output of SplitMix64 started at that key. The top 53 bits of the output
// give k in [0, 2^53) and the value k * 2^-52 - 1, exact in a double, in [-1, 1).
//
// Rounding to the element type:
//   f64                 the value itself;
//   f32, f16, bf16      round to nearest even (Tensor::SetFromDouble);
//   i64, i32            round half to even, so the values are -1, 0 and 1 (about 1/4,
//                       1/2 and 1/4 of the time): small integers that stay exact
//                       through any arithmetic a test program does;
//   i1                  1 if the value is >= 0, else 0 (a fair coin).
#ifndef COMMIR_RUNTIME_RANDOM_INPUTS_H_
#define COMMIR_RUNTIME_RANDOM_INPUTS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// The value in [-1, 1) of element `element_index` of argument `arg_index`, before
// rounding to an element type.
double RandomUniformValue(uint64_t seed, int arg_index, int64_t element_index);

// Argument `arg_index`'s whole (global) random tensor of the given type and shape.
Tensor RandomGlobalTensor(uint64_t seed, int arg_index, ElementType type,
                          absl::Span<const int64_t> shape);

// How one argument's values are drawn (commir-run --init): the uniform values above;
// those values times `value` (uniform in [-value, value), for float types only: integer
// and i1 arguments keep the plain rule); or every element `value`.
struct InitRule {
  enum class Kind { kUniform, kScaledUniform, kConstant };
  Kind kind = Kind::kUniform;
  double value = 1;
};

// As above, drawn by `rule`. Still a pure function of (seed, arg_index, element index),
// so the values do not depend on the device count either.
Tensor RandomGlobalTensor(uint64_t seed, int arg_index, ElementType type,
                          absl::Span<const int64_t> shape, const InitRule& rule);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_RANDOM_INPUTS_H_
