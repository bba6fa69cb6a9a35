// schedule-report: what a communication schedule costs each device, for comparing
// schedules of one program (benchmarks/schedule_table.py prints the table). Per spmd
// function, counting every loop trip:
//   collectives  collectives executed other than shift
//   shifts       shifts executed
//   ring-steps   shifts executed on the busiest stream: the sequential ring steps (a
//                bidirectional ring sends on two streams at once)
//   ring-bytes   bytes those shifts send: the ring's link time in bytes (a
//                bidirectional ring of half-blocks sends half of uni's)
//   gemms        matmuls executed
//   attentions   attention and attention_grad ops executed (a ring, forward or
//                backward, runs one per block it visits)
//   bytes        bytes each device sends (the ops' OpDef cost formulas, as comm-report)
//   peak-extra   the most bytes live at once beyond the arguments and the buffers that
//                end up returned: a liveness simulation of the program in execution
//                order, where a value is freed after its last use (a use inside a loop
//                keeps an outer value until the loop ends), a reshape is a view of its
//                operand and a dynamic_update_slice whose operand dies there updates it
//                in place (what a backend with buffer reuse does).
// The report goes to stderr, one line per spmd function (the shared ag_matmul example
// as a one-way ring, wrapped here):
//   // schedule-report @ag_matmul: collectives 0  shifts 7  ring-steps 7
//   //   ring-bytes 917504  gemms 8  attentions 0  bytes/device 917504
//   //   peak-extra/device 294912
// Global functions are skipped with a line saying so. Loops are not run trip by trip:
// the simulation finds where iterations repeat and multiplies (see LoopSimulation), so
// a loop of 10^12 trips reports as fast as one of 10. Counts that exceed int64 fail the
// pass with an error at the loop (exit status 1).
#ifndef COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_REPORT_H_
#define COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir::schedules {

struct ScheduleStats {
  int64_t collectives = 0;
  int64_t shifts = 0;
  int64_t ring_steps = 0;
  double ring_bytes = 0;
  int64_t gemms = 0;
  int64_t attentions = 0;
  double bytes_per_device = 0;
  double peak_extra_bytes = 0;
  // Set when a count exceeds int64 (the counts are then incomplete): the loop whose
  // trips made it overflow. ScheduleReportPass reports an error there.
  const Operation* overflow_at = nullptr;
};

// How the simulation runs loops. kFastForward (the report's) finds where a loop's
// iterations repeat and counts the repeating middle without running it, so the time
// does not depend on trip counts; kEveryIteration runs every trip (tests compare the two).
enum class LoopSimulation { kFastForward, kEveryIteration };

ScheduleStats ComputeScheduleStats(const Function& function,
                                   LoopSimulation loops = LoopSimulation::kFastForward);
std::string FormatScheduleReport(const Module& module);

class ScheduleReportPass : public ReportPass {
 public:
  static const PassInfo& Info();
  ScheduleReportPass() : ReportPass(Info()) {}
  absl::Status Run(Module& module) override;
};

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_SCHEDULE_REPORT_H_
