// Test support for schedule passes: lower a global program with the default spmd
// pipeline, apply a schedule, and check the scheduled program's run on the cpu backend
// against the one-device run of the global program.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_CHECK_H_
#define COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_CHECK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"
#include "runtime/interpreter.h"

namespace commir::schedules {

using ScheduleFn = std::function<absl::Status(Module&)>;

struct MatmulScheduleCheck {
  std::unique_ptr<Module> scheduled;  // the module after the schedule
  std::string printed;                // ... printed
  std::string report;                 // one comparison line per result
  bool pass = false;
  std::vector<runtime::OpEvent> events;  // the scheduled run's per-op events
};

// Runs `function` on the cpu backend on every device of its mesh (one for a global
// function), each device given its part of `global_inputs` by the declared layouts, and
// assembles the global results. Per-op events go to `events` if not null.
absl::StatusOr<std::vector<runtime::Tensor>> RunWithGlobalInputs(
    const Function& function, const std::vector<runtime::Tensor>& global_inputs,
    std::vector<runtime::OpEvent>* events = nullptr);

// Parses `text` twice, runs @`function` of one copy on one device as the reference,
// lowers the other (propagate-sharding, lower-to-spmd, canonicalize, cse, dce), applies
// `schedule`, verifies, runs it on every device with the same random inputs and compares
// each result with its element type's default tolerance.
absl::StatusOr<MatmulScheduleCheck> CheckMatmulSchedule(absl::string_view text,
                                                        absl::string_view function,
                                                        const ScheduleFn& schedule,
                                                        uint64_t seed = 0);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_CHECK_H_
