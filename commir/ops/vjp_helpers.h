// Helpers shared by the derivative rules (OpDef::vjp) of the op definitions.
#ifndef COMMIR_COMMIR_OPS_VJP_HELPERS_H_
#define COMMIR_COMMIR_OPS_VJP_HELPERS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "commir/builder.h"
#include "commir/ir.h"

namespace commir::ops {

// The element type of the cotangent of a value of type `type`: `grad_type` for floats
// when set, the value's own element type otherwise.
ElementType CotangentElementType(Type type, std::optional<ElementType> grad_type);

// Operand `i` of `op` as an operand of a backward op computing in `et`: a number literal
// stays a literal of that type, a value is converted to `et` (itself when it has it).
OpBuilder::Operand PrimalAs(OpBuilder& b, const Operation& op, int i, ElementType et);
// Result `i` of `op` converted to `et`.
Value* ResultAs(OpBuilder& b, const Operation& op, int i, ElementType et);

// A number literal operand typed as a scalar of `et`.
OpBuilder::Operand Literal(double value, ElementType et);
// A tensor of `dims` filled with `value`.
Value* Filled(OpBuilder& b, double value, ElementType et, const std::vector<int64_t>& dims);

// The adjoint of NumPy broadcasting: sums `cotangent` over the dimensions it has beyond
// `dims` (leading) and over those `dims` holds as 1, giving a tensor of shape `dims`.
Value* SumToShape(OpBuilder& b, Value* cotangent, const std::vector<int64_t>& dims);
// `x` reshaped to `dims` (x itself when it has them).
Value* ReshapeTo(OpBuilder& b, Value* x, const std::vector<int64_t>& dims);
// `x` broadcast to `dims` (x itself when it has them).
Value* BroadcastTo(OpBuilder& b, Value* x, const std::vector<int64_t>& dims);
// reduce_sum / reduce_mean of `x` over `dims`, keeping them as size 1.
Value* SumKeep(OpBuilder& b, Value* x, const std::vector<int64_t>& dims);
Value* MeanKeep(OpBuilder& b, Value* x, const std::vector<int64_t>& dims);
// `cond ? a : 0` and `cond ? 0 : a`.
Value* SelectOrZero(OpBuilder& b, Value* cond, Value* a);
Value* ZeroOrSelect(OpBuilder& b, Value* cond, Value* a);

// The rule's result when the builder failed, or `cotangents`.
absl::StatusOr<std::vector<Value*>> Finish(OpBuilder& b, std::vector<Value*> cotangents);

}  // namespace commir::ops

#endif  // COMMIR_COMMIR_OPS_VJP_HELPERS_H_
