// comm-report: what a layout costs in communication. For each spmd function, the number
// of collectives of each kind and the bytes each device sends for them, from the ops'
// OpDef cost formulas (ring algorithms, as NCCL: all_gather and all_to_all send
// (n-1)/n of their result, reduce_scatter (n-1)/n of its operand, all_reduce twice
// that, shift its whole operand). A collective inside a `for` loop counts once per
// iteration (nested loops multiply).
//
// The pass writes the report to stderr, so that commir-opt's stdout stays the module
// (and a pipeline can print both). Format, one block per function in module order:
//
//   // comm-report @mlp: spmd on @m (4 devices)
//   //   all_gather       count 1  bytes/device 98304
//   //   reduce_scatter   count 1  bytes/device 98304
//   //   total            count 2  bytes/device 196608
//
// Bytes are rounded to whole numbers. A spmd function without collectives reports
// "no collectives"; a global function reports that it has no explicit communication
// yet (lower it with lower-to-spmd first). Trip counts are exact over the whole int64
// range; a count that exceeds int64 (nested loops of 2^62 trips) fails the pass with an
// error at the loop (exit status 1) instead of printing a wrapped number.
#ifndef COMMIR_TRANSFORMS_SHARDING_COMM_REPORT_H_
#define COMMIR_TRANSFORMS_SHARDING_COMM_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir::sharding {

struct CollectiveTotals {
  OpKind kind;
  int64_t count = 0;
  double bytes_per_device = 0;
};

struct FunctionCommReport {
  const Function* function = nullptr;
  // Collective kinds that occur, in OpKind order.
  std::vector<CollectiveTotals> collectives;
  // Set when a count exceeds int64 (then the counts are incomplete): the innermost loop
  // whose trip count overflowed the product of the enclosing ones, or the collective
  // whose total overflowed. CommReportPass reports it as an error there.
  const Operation* overflow_at = nullptr;
  int64_t total_count() const;
  double total_bytes() const;
};

FunctionCommReport ComputeCommReport(const Function& function);
std::string FormatCommReport(const Module& module);

class CommReportPass : public ReportPass {
 public:
  static const PassInfo& Info();
  CommReportPass() : ReportPass(Info()) {}
  absl::Status Run(Module& module) override;
};

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_COMM_REPORT_H_
