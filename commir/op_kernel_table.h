// Backend kernel tables indexed by op kind, and the rule for which ops need a kernel.
//
// Each backend registers one kernel per op it runs (elementwise ops by their definition's
// traits and scalar function, every other family by kind) and checks its tables at
// construction, so that an op added to the op table without a kernel is reported when
// the backend is built, not when a program first uses the op.
#ifndef COMMIR_COMMIR_OP_KERNEL_TABLE_H_
#define COMMIR_COMMIR_OP_KERNEL_TABLE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "commir/op_def.h"

namespace commir {

// Ops the interpreter carries out itself, so no backend sees them: terminators, loops,
// calls (the interpreter runs the callee's body), and the ops whose values are always `index` (rank, and rem, which takes index
// operands only). Index uses of the other arithmetic ops are the interpreter's too, but
// their tensor uses need a kernel.
inline bool RunsInInterpreterOnly(const OpDef& def) {
  return def.Has(kTerminator) || def.Has(kHasRegion) || def.kind == OpKind::kCall ||
         def.kind == OpKind::kRank || def.kind == OpKind::kRem;
}

// What Backend::RunOp must handle: every op that is neither interpreter-only nor a
// collective.
inline bool NeedsTensorKernel(const OpDef& def) {
  return !RunsInInterpreterOnly(def) && !def.Has(kCollective);
}

// What Backend::RunCollective must handle.
inline bool NeedsCollectiveKernel(const OpDef& def) { return def.Has(kCollective); }

// A kernel (a function pointer, or anything default-constructible that converts to bool)
// per op kind.
template <typename Kernel>
class OpKernelTable {
 public:
  OpKernelTable() : kernels_(AllOpDefs().size()) {}

  void Register(OpKind kind, Kernel kernel) { kernels_[Index(kind)] = kernel; }
  // For tests of the completeness check.
  void Remove(OpKind kind) { kernels_[Index(kind)] = Kernel(); }

  // Registers `unary`, `binary` and `ternary` for every elementwise op of exactly one, two
  // or three operands that computes a scalar function (OpDef::elementwise_fn): the op
  // definitions, not a list here, say which ops these are.
  void RegisterElementwise(Kernel unary, Kernel binary, Kernel ternary) {
    for (const OpDef* def : AllOpDefs()) {
      if (!def->Has(kElementwise) || def->elementwise_fn == nullptr) continue;
      if (def->min_operands != def->max_operands) continue;
      if (def->min_operands == 1) Register(def->kind, unary);
      if (def->min_operands == 2) Register(def->kind, binary);
      if (def->min_operands == 3) Register(def->kind, ternary);
    }
  }

  // Registers `reduce` for every op that reduces over dimensions of one tensor
  // (OpDef::reduction_fn, not a collective): reduce_sum, reduce_max, reduce_mean.
  void RegisterReductions(Kernel reduce) {
    for (const OpDef* def : AllOpDefs()) {
      if (def->reduction_fn != nullptr && !def->Has(kCollective)) Register(def->kind, reduce);
    }
  }

  // The kernel of `kind`; empty (null) when none is registered.
  Kernel Find(OpKind kind) const { return kernels_[Index(kind)]; }

  // Ok when every op that `needs` selects has a kernel; otherwise an internal error
  // naming the backend, the table and each op without one.
  absl::Status CheckComplete(absl::string_view backend, absl::string_view table,
                             bool (*needs)(const OpDef&)) const {
    std::vector<std::string> missing;
    for (const OpDef* def : AllOpDefs()) {
      if (needs(*def) && !Find(def->kind)) missing.push_back(absl::StrCat("'", def->name, "'"));
    }
    if (missing.empty()) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("the ", backend, " backend's ", table,
                                            " table has no kernel for ",
                                            absl::StrJoin(missing, ", ")));
  }

 private:
  static size_t Index(OpKind kind) { return static_cast<size_t>(kind); }

  std::vector<Kernel> kernels_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_OP_KERNEL_TABLE_H_
