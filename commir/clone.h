// Copying IR in memory: ops (with their regions), functions and modules. Passes that copy
// code (inlining, the forward pass of a gradient, recomputation) and tools that need a
// module of their own (the search's candidates) share this one implementation instead
// of printing and parsing.
//
// A copy keeps everything the printer shows (op kinds, operands, attributes, result and
// argument types, value names) and the source locations, so errors about a copy still
// name the place in the file the original came from.
#ifndef COMMIR_COMMIR_CLONE_H_
#define COMMIR_COMMIR_CLONE_H_

#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir {

struct CloneOpOptions {
  // Replaces the op's attributes (null: copied).
  const AttrDict* attrs = nullptr;
  // Result types appended after the op's own (unnamed): the copy may return more.
  absl::Span<const Type> extra_result_types;
  // Where an operand that `map` lacks is looked up (null: every operand must be in
  // `map`, which then holds the values defined outside the op).
  const ValueMap* fallback = nullptr;
};

// A copy of `op` and its regions inserted into `block` before `position` (appended when
// null). Its operands are the copies `map` gives (literal operands are copied); `map`
// learns the copy's results and region arguments.
Operation* CloneOp(const Operation& op, Block& block, Operation* position, ValueMap& map,
                   const CloneOpOptions& options = {});

}  // namespace commir

#endif  // COMMIR_COMMIR_CLONE_H_
