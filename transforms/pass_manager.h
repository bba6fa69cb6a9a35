// Runs configured passes over a module, in order, with optional verification and IR
// dumps after each pass (commir-opt --verify-each, --print-ir-after-all).
#ifndef COMMIR_TRANSFORMS_PASS_MANAGER_H_
#define COMMIR_TRANSFORMS_PASS_MANAGER_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

class PassManager {
 public:
  void AddPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  void AddPasses(std::vector<std::unique_ptr<Pass>> passes);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

  // Runs the verifier after every pass and fails, naming the pass, if the IR is invalid.
  void set_verify_each(bool verify_each) { verify_each_ = verify_each; }
  // After every pass that succeeds, writes
  //   // -----// IR Dump After <pass> //----- //
  // and the printed module to `out` (null: no dumps).
  void set_print_ir_after_all(std::ostream* out) { dump_ = out; }
  // Called with each remark of each pass right after that pass runs (also when it
  // fails), so remarks interleave with IR dumps in pass order. Unset: remarks stay on
  // the passes (Pass::remarks()) and nothing is printed.
  using RemarkHandler = std::function<void(const Pass&, const PassRemark&)>;
  void set_remark_handler(RemarkHandler handler) { remark_handler_ = std::move(handler); }

  // Runs every pass in order and stops at the first failure:
  //  - a pass returns an error: FailedPrecondition "pass 'NAME' failed: MESSAGE";
  //  - verify_each finds invalid IR: Internal "pass 'NAME' produced invalid IR".
  // Located errors (from the pass or the verifier) go to `diagnostics`, each message
  // prefixed with the pass it came from, so a tool can render them with source lines.
  absl::Status Run(Module& module, DiagnosticEngine& diagnostics);
  // As above; the located errors are folded into the status message.
  absl::Status Run(Module& module);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  bool verify_each_ = false;
  std::ostream* dump_ = nullptr;
  RemarkHandler remark_handler_;
};

// The statistics of `passes` after a run, as MLIR's -pass-statistics lists them: a
// banner, then each pass in pipeline order with its counters,
//   cse
//     (rewrites) 2 : Ops merged into an equivalent op
// and "(no statistics)" for a pass that keeps none.
std::string FormatPassStatistics(const std::vector<std::unique_ptr<Pass>>& passes);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_PASS_MANAGER_H_
