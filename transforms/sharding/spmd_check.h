// Test support for the partitioner: lowers a global function with the default spmd
// pipeline and checks the multi-device run on the cpu backend against the one-device
// run of the global function (what `commir-run --check` does).
#ifndef COMMIR_TRANSFORMS_SHARDING_SPMD_CHECK_H_
#define COMMIR_TRANSFORMS_SHARDING_SPMD_CHECK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"

namespace commir::sharding {

// Runs propagate-sharding (unless `propagate` is false), lower-to-spmd, canonicalize,
// cse and dce on `module`, verifying the IR after each step.
absl::Status RunDefaultSpmdPipeline(Module& module, bool propagate = true);

struct SpmdCheck {
  // The lowered module, printed.
  std::string lowered;
  // One line per result (runtime::FormatComparison).
  std::string report;
  bool pass = false;
};

// Parses `text` twice: runs @`function` of the first copy on one device as the
// reference, lowers the second copy and runs it on every device of the mesh, with the
// same random inputs (from `seed`), and compares every result with the default
// tolerance of its element type. Errors (parse, lowering, verification, execution)
// come back as a status.
absl::StatusOr<SpmdCheck> CheckPartitioned(absl::string_view text, absl::string_view function,
                                           uint64_t seed = 0, bool propagate = true);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_SPMD_CHECK_H_
