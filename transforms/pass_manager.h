// Runs configured passes over a module, in order, with optional verification and IR
// dumps after each pass (commir-opt --verify-each, --print-ir-after-all).
#ifndef COMMIR_TRANSFORMS_PASS_MANAGER_H_
#define COMMIR_TRANSFORMS_PASS_MANAGER_H_

#include <memory>
#include <ostream>
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
};

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_PASS_MANAGER_H_
