// Test support for the attention schedules: lowers a global program with the default
// spmd pipeline, applies a schedule pass, and checks the multi-device run on the cpu
// backend against the one-device run of the global program (commir-run --check).
#ifndef COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_CHECK_H_
#define COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"

namespace commir::schedules {

struct ScheduleCheck {
  std::string scheduled;  // the module after the schedule pass, printed
  std::string report;     // one comparison line per result
  bool pass = false;
};

// Parses `text` twice; runs @`function` of one copy on a single device as the reference;
// lowers the other (RunDefaultSpmdPipeline), applies `schedule`, verifies it and runs it
// on every device of the mesh, with the same random inputs from `seed`; compares every
// result at its element type's default tolerance.
absl::StatusOr<ScheduleCheck> CheckSchedule(absl::string_view text, absl::string_view function,
                                            const std::function<absl::Status(Module&)>& schedule,
                                            uint64_t seed = 0);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_CHECK_H_
