#include "transforms/sharding/comm_report.h"

#include <cmath>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/op_cost.h"

namespace commir::sharding {
namespace {

int64_t TripCount(const Operation& loop) {
  int64_t lower = loop.attrs().GetInt("lower", 0);
  int64_t upper = loop.attrs().GetInt("upper", 0);
  int64_t step = loop.attrs().GetInt("step", 1);
  if (step <= 0 || upper <= lower) return 0;
  return (upper - lower + step - 1) / step;
}

void Accumulate(const Block& block, const Function& function, int64_t multiplier,
                std::map<OpKind, CollectiveTotals>& totals) {
  for (const Operation* op : block) {
    if (op->Is(OpKind::kFor)) {
      int64_t trips = TripCount(*op);
      for (int r = 0; r < op->num_regions(); ++r) {
        Accumulate(*op->region(r), function, multiplier * trips, totals);
      }
      continue;
    }
    if (!op->def().Has(kCollective)) continue;
    CollectiveTotals& t = totals[op->kind()];
    t.kind = op->kind();
    t.count += multiplier;
    t.bytes_per_device +=
        static_cast<double>(multiplier) * EstimateOpCost(*op, function).bytes_communicated;
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
  Accumulate(*function.body(), function, 1, totals);
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

absl::Status CommReportPass::Run(Module& module) {
  std::ostream& out = out_ != nullptr ? *out_ : std::cerr;
  out << FormatCommReport(module);
  out.flush();
  return absl::OkStatus();
}

}  // namespace commir::sharding
