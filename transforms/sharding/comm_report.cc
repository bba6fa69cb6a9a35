#include "transforms/sharding/comm_report.h"

#include "transforms/option_schema.h"

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/op_cost.h"
#include "transforms/loop_trip_count.h"

namespace commir::sharding {
namespace {

// Adds the collectives of `block`, each executed `multiplier` times (nullopt: more than
// int64 can count, because of `loop`, the innermost loop whose trips overflowed).
void Accumulate(const Block& block, const Function& function, std::optional<int64_t> multiplier,
                const Operation* overflow_loop, std::map<OpKind, CollectiveTotals>& totals,
                FunctionCommReport& report) {
  for (const Operation* op : block) {
    if (op->Is(OpKind::kFor)) {
      std::optional<int64_t> inner;
      const Operation* inner_overflow = overflow_loop;
      if (multiplier.has_value()) inner = CheckedMultiply(*multiplier, LoopTripCount(*op));
      if (multiplier.has_value() && !inner.has_value()) inner_overflow = op;
      for (int r = 0; r < op->num_regions(); ++r) {
        Accumulate(*op->region(r), function, inner, inner_overflow, totals, report);
      }
      continue;
    }
    if (!op->def().Has(kCollective)) continue;
    CollectiveTotals& t = totals[op->kind()];
    t.kind = op->kind();
    std::optional<int64_t> count =
        multiplier.has_value() ? CheckedAdd(t.count, *multiplier) : std::nullopt;
    if (!count.has_value()) {
      if (report.overflow_at == nullptr) {
        report.overflow_at = overflow_loop != nullptr ? overflow_loop : op;
      }
      continue;
    }
    t.count = *count;
    t.bytes_per_device +=
        static_cast<double>(*multiplier) * EstimateOpCost(*op, function).bytes_communicated;
  }
}

}  // namespace

int64_t FunctionCommReport::total_count() const {
  int64_t n = 0;
  for (const CollectiveTotals& t : collectives) n += t.count;
  return n;
}

double FunctionCommReport::total_bytes() const {
  double n = 0;
  for (const CollectiveTotals& t : collectives) n += t.bytes_per_device;
  return n;
}

FunctionCommReport ComputeCommReport(const Function& function) {
  FunctionCommReport report;
  report.function = &function;
  if (!function.is_spmd()) return report;
  std::map<OpKind, CollectiveTotals> totals;
  Accumulate(*function.body(), function, 1, nullptr, totals, report);
  for (const auto& [kind, t] : totals) report.collectives.push_back(t);
  return report;
}

std::string FormatCommReport(const Module& module) {
  std::string out;
  for (const Function* function : module.functions()) {
    std::string where =
        function->mesh() == nullptr
            ? std::string("no mesh")
            : absl::StrFormat("@%s (%d devices)", function->mesh()->name(),
                              function->mesh()->num_devices());
    if (!function->is_spmd()) {
      absl::StrAppendFormat(&out,
                            "// comm-report @%s: global function on %s, no explicit "
                            "communication (lower it with lower-to-spmd)\n",
                            function->name(), where);
      continue;
    }
    absl::StrAppendFormat(&out, "// comm-report @%s: spmd on %s\n", function->name(), where);
    FunctionCommReport report = ComputeCommReport(*function);
    if (report.collectives.empty()) {
      out += "//   no collectives\n";
      continue;
    }
    for (const CollectiveTotals& t : report.collectives) {
      absl::StrAppendFormat(&out, "//   %-16s count %d  bytes/device %.0f\n", GetOpDef(t.kind).name,
                            t.count, std::round(t.bytes_per_device));
    }
    absl::StrAppendFormat(&out, "//   %-16s count %d  bytes/device %.0f\n", "total",
                          report.total_count(), std::round(report.total_bytes()));
  }
  return out;
}

const PassInfo& CommReportPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<CommReportPass>(
      "comm-report",
      "Print to stderr, per spmd function, the collectives by kind: count and bytes per device"));
  return *info;
}

absl::Status CommReportPass::Run(Module& module) {
  // Counts beyond int64 are an error rather than a wrapped or saturated number
  // (docs/format-decisions.md).
  absl::Status status;
  for (const Function* function : module.functions()) {
    FunctionCommReport report = ComputeCommReport(*function);
    if (report.overflow_at == nullptr) continue;
    std::string message = absl::StrFormat(
        "the collectives of @%s execute more than %d times here: the count does not fit in "
        "int64",
        function->name(), std::numeric_limits<int64_t>::max());
    diagnostics().Error(report.overflow_at->loc(), message);
    status = absl::FailedPreconditionError(absl::StrCat("comm-report: ", message));
  }
  if (!status.ok()) return status;
  Emit(FormatCommReport(module));
  return absl::OkStatus();
}

}  // namespace commir::sharding
