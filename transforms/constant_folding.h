// Scalar arithmetic for constant folding, bit for bit what the cpu executor computes.
//
// A `full` constant (or a number literal) is one value repeated, so folding an
// elementwise op over constants folds one scalar. To keep folding from changing results,
// the values follow the executor's rules exactly (runtime/tensor.cc,
// backend_cpu/elementwise.cc):
//  - a constant's written value is first rounded to its element type (floats to nearest
//    even; integers to nearest even with saturation; i1 is value != 0);
//  - f64 math runs in double, f32/f16/bf16 math in float with one rounding to nearest
//    even into f16/bf16 (double then f16 could round twice); integer math in int64 with
//    two's-complement wrapping, stored to i32 by truncation;
//  - `index` arithmetic is int64 with floor division and remainder.
// A fold that the executor would report as an error (integer division by zero, a
// negative integer power) or whose int64 result would overflow is refused, so the
// error stays where the program put it.
#ifndef COMMIR_TRANSFORMS_CONSTANT_FOLDING_H_
#define COMMIR_TRANSFORMS_CONSTANT_FOLDING_H_

#include <cstdint>
#include <optional>

#include "commir/attribute.h"
#include "commir/ir.h"
#include "commir/op_def.h"
#include "commir/type.h"

namespace commir {

// One element of a constant of a known type: `f` for float element types (exactly
// representable in the type), `i` for integer element types and `index`.
struct Scalar {
  double f = 0;
  int64_t i = 0;
};

// Whether values of `type` (a tensor or index) are held in Scalar::i.
bool IsIntegral(Type type);

// `value` (a written number) as an element of `type` holds it.
Scalar RoundToType(double value, Type type);

// The element of a constant operand: a number literal, or the result of `full`.
std::optional<Scalar> ConstantOf(const Value* value);

// Elementwise unary op `op` (neg ... gelu) on one element of type `type`.
std::optional<Scalar> FoldUnary(const Operation& op, Type type, Scalar x);
// Elementwise binary op `kind` (add ... pow, rem) on elements of `type`.
std::optional<Scalar> FoldBinary(OpKind kind, Type type, Scalar a, Scalar b);
// `convert` of one element of type `from` to type `to`.
Scalar FoldConvert(Type from, Type to, Scalar x);

// The `value` attribute of a `full` of `type` that holds `x`, if the executor reads it
// back exactly (integers beyond 2^53 do not survive its double).
std::optional<Attribute> ValueAttribute(Scalar x, Type type);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_CONSTANT_FOLDING_H_
