// Where each value of a function dies, so that the interpreter can release a tensor
// after its last use instead of keeping every intermediate until the function returns:
// memory then follows the live values, not the number of ops.
//
// A value's last use is taken in the block that defines it: a use nested in a region (a
// loop body using a value defined outside the loop) counts as a use by the op that owns
// the region, so such a value lives until the loop has finished. Uses include `stream =
// %v` operands. Values used by a block's terminator (`yield`, `return`) are not released
// by the block: whoever runs the block reads them first (see ReleasedByOwner).
#ifndef COMMIR_COMMIR_LIVENESS_H_
#define COMMIR_COMMIR_LIVENESS_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir {

class Liveness {
 public:
  // One pass over the function: time linear in its uses (times the nesting depth).
  explicit Liveness(const Function& function);

  // Values to release once `op` has run: values of op's block whose last use is `op`,
  // and op's results that nothing uses.
  absl::Span<const Value* const> DeadAfter(const Operation& op) const;

  // Values of `block` that are still held when it reaches its terminator: the values
  // its terminator uses and the arguments nothing uses. The runner of the block (a loop, the function)
  // releases them after reading the terminator's operands.
  absl::Span<const Value* const> ReleasedByOwner(const Block& block) const;

 private:
  absl::flat_hash_map<const Operation*, std::vector<const Value*>> dead_after_;
  absl::flat_hash_map<const Block*, std::vector<const Value*>> released_by_owner_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_LIVENESS_H_
