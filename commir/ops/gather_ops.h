// gather and scatter_add (docs/language.md, "gather", "scatter_add"): their shapes, their
// op table entries and their derivative rules, kept together and apart from the other
// op families.
#ifndef COMMIR_COMMIR_OPS_GATHER_OPS_H_
#define COMMIR_COMMIR_OPS_GATHER_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/op_def.h"
#include "commir/type.h"

namespace commir::ops {

// gather(table, indices){axis} has shape table[:axis] + indices + table[axis+1:];
// scatter_add's updates have that shape too.
struct GatherShapes {
  int64_t axis = 0;  // normalized into [0, rank(table))
  std::vector<int64_t> result;
};
// Checks the table (a tensor of rank >= 1), the indices (an integer tensor) and the axis,
// and that the result's element count fits in 64 bits.
absl::StatusOr<GatherShapes> GatherShapesOf(Type table, Type indices, int64_t axis);

void AppendGatherOps(std::vector<OpDef>& ops);

// gather_vjp.cc: gather's cotangent is scatter_add of the result's cotangent into zeros
// of the table's shape; scatter_add's is the cotangent itself for the base and its
// gather for the updates. Indices carry none.
absl::StatusOr<std::vector<Value*>> GatherVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> ScatterAddVjp(OpBuilder& b, const VjpArgs& args);

}  // namespace commir::ops

#endif  // COMMIR_COMMIR_OPS_GATHER_OPS_H_
