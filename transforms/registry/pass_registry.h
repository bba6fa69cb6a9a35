// The registry of every pass: one table that --list-passes, the pipeline parser and
// the documentation all read. Adding a pass means adding one row in pass_registry.cc.
#ifndef COMMIR_TRANSFORMS_REGISTRY_PASS_REGISTRY_H_
#define COMMIR_TRANSFORMS_REGISTRY_PASS_REGISTRY_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "transforms/pass.h"

namespace commir {

// Every pass, sorted by name. The rows live for the whole program (passes point at them).
absl::Span<const PassInfo> RegisteredPasses();

// The row named `name`, or null.
const PassInfo* FindRegisteredPass(absl::string_view name);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_REGISTRY_PASS_REGISTRY_H_
