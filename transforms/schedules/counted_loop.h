// Building the counted `for` loops (spmd functions only) that every schedule emits: the loop op
// with its induction variable and carried values, and the yield that ends its body.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_COUNTED_LOOP_H_
#define COMMIR_TRANSFORMS_SCHEDULES_COUNTED_LOOP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir::schedules {

struct CountedLoop {
  Operation* op = nullptr;
  Block* body = nullptr;
  Value* iv = nullptr;
  std::vector<Value*> carried;
};

// `for %iv_name = lower to upper step 1 iter(...)` inserted before `before` in `block`
// (appended when null), carrying `inits`; carried value k is named carried_names[k]
// (unnamed past the end of the list). The body is left empty: end it with YieldFromLoop.
CountedLoop InsertCountedLoop(Block* block, Operation* before, Location loc, int64_t lower,
                              int64_t upper, absl::Span<Value* const> inits,
                              absl::string_view iv_name,
                              absl::Span<const std::string> carried_names);

// Ends the loop body with `yield values` (one per carried value).
void YieldFromLoop(const CountedLoop& loop, absl::Span<Value* const> values, Location loc = {});

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_COUNTED_LOOP_H_
