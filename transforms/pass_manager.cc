#include "transforms/pass_manager.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/printer.h"
#include "commir/verifier.h"

namespace commir {
namespace {

// Copies `from` into `to` with every message prefixed by `prefix`.
void Forward(const DiagnosticEngine& from, absl::string_view prefix, DiagnosticEngine& to) {
  for (const Diagnostic& d : from.Sorted()) to.Error(d.loc, absl::StrCat(prefix, d.message));
}

}  // namespace

void PassManager::AddPasses(std::vector<std::unique_ptr<Pass>> passes) {
  for (std::unique_ptr<Pass>& pass : passes) passes_.push_back(std::move(pass));
}

absl::Status PassManager::Run(Module& module, DiagnosticEngine& diagnostics) {
  for (const std::unique_ptr<Pass>& pass : passes_) {
    // A fresh engine per pass, so that what it reports can be attributed to it.
    DiagnosticEngine pass_diagnostics;
    pass->set_diagnostics(&pass_diagnostics);
    pass->ClearReports();
    absl::Status status = pass->Run(module);
    pass->set_diagnostics(nullptr);
    if (remark_handler_) {
      for (const PassRemark& remark : pass->remarks()) remark_handler_(*pass, remark);
    }
    if (!status.ok() || pass_diagnostics.has_errors()) {
      Forward(pass_diagnostics, absl::StrCat("pass '", pass->name(), "': "), diagnostics);
      std::string message = status.ok() ? "it reported errors" : std::string(status.message());
      return absl::FailedPreconditionError(
          absl::StrFormat("pass '%s' failed: %s", pass->name(), message));
    }
    if (verify_each_) {
      DiagnosticEngine verifier_diagnostics;
      VerifyModule(module, verifier_diagnostics);
      if (verifier_diagnostics.has_errors()) {
        Forward(verifier_diagnostics, absl::StrCat("invalid IR after pass '", pass->name(), "': "),
                diagnostics);
        return absl::InternalError(absl::StrFormat("pass '%s' produced invalid IR", pass->name()));
      }
    }
    if (dump_ != nullptr) {
      *dump_ << "// -----// IR Dump After " << pass->name() << " //----- //\n"
             << PrintModule(module);
      dump_->flush();
    }
  }
  return absl::OkStatus();
}

std::string FormatPassStatistics(const std::vector<std::unique_ptr<Pass>>& passes) {
  constexpr absl::string_view kRule =
      "===-------------------------------------------------------------------------===\n";
  std::string out = absl::StrCat(kRule, "                         ... Pass statistics report ...\n",
                                 kRule);
  for (const std::unique_ptr<Pass>& pass : passes) {
    absl::StrAppend(&out, pass->name(), "\n");
    if (pass->statistics().empty()) absl::StrAppend(&out, "  (no statistics)\n");
    for (const PassStatistic& statistic : pass->statistics()) {
      absl::StrAppendFormat(&out, "  (%s) %d : %s\n", statistic.name, statistic.value,
                            statistic.description);
    }
  }
  return out;
}

absl::Status PassManager::Run(Module& module) {
  DiagnosticEngine diagnostics;
  absl::Status status = Run(module, diagnostics);
  if (status.ok()) return status;
  std::string message(status.message());
  for (const Diagnostic& d : diagnostics.Sorted()) {
    absl::StrAppendFormat(&message, "\n%d:%d: error: %s", d.loc.line, d.loc.col, d.message);
  }
  return absl::Status(status.code(), message);
}

}  // namespace commir
