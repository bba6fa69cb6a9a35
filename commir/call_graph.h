// The call graph of a module, walked without recursion. A chain of calls is as long as
// its author writes it (20,000 functions that each call the next make a valid module),
// so code that follows calls must not recurse once per call: it takes the functions in
// the order this gives, callees first, and folds over them.
#ifndef COMMIR_CALL_GRAPH_H_
#define COMMIR_CALL_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir {

// How many ops expanding calls may make: the ops `inline` may copy into a module, and
// the ops one run of a function may execute through its calls (each call, and each op
// of its callee's body, once per call). A model calls its layer
// once per layer, tens of thousands of ops in all; a function that calls the next twice,
// forty deep, expands to 2^40 ops.
inline constexpr uint64_t kMaxExpandedOps = uint64_t{1} << 20;

// The functions of a module by name, for code that resolves many calls
// (Module::FindFunction scans every function).
class FunctionsByName {
 public:
  explicit FunctionsByName(const Module& module);
  // The function of that name, or null.
  Function* Find(absl::string_view name) const;
  // The function `call` names, or null (not a call, no such function).
  Function* Callee(const Operation& call) const;

 private:
  absl::flat_hash_map<std::string, Function*> by_name_;
};

// The calls in `function`'s body, loop bodies included, in program order.
std::vector<Operation*> CallsIn(const Function& function);

// Called for a call whose callee is on the current path of the search (the call closes
// a cycle): `path` runs from the search's root to the function holding the call, and
// holds the callee.
using CycleCallback = absl::FunctionRef<void(Operation& call, const Function& callee,
                                             absl::Span<Function* const> path)>;

// The functions reachable from `roots` (functions of `module`, included), each after
// every function it calls: the post-order of a depth-first search from each root in
// turn, following calls in program order. Calls of unknown functions are skipped; a
// call that closes a cycle is not followed, and is handed to `on_cycle`. Iterative: the
// depth of the call graph costs heap, not stack.
std::vector<Function*> CalleesFirst(const Module& module, absl::Span<Function* const> roots,
                                    CycleCallback on_cycle);
// Every function of `module`, from its functions in declaration order.
std::vector<Function*> CalleesFirst(const Module& module, CycleCallback on_cycle);

}  // namespace commir

#endif  // COMMIR_CALL_GRAPH_H_
