#include "search/train_program.h"

#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/element_type.h"
#include "transforms/autodiff/autodiff.h"

namespace commir::search {

absl::StatusOr<std::string> AddBackward(Module& module, const std::string& function) {
  const Function* forward = module.FindFunction(function);
  if (forward == nullptr) return absl::NotFoundError("no function @" + function);
  AutodiffOptions options;
  options.seed_cotangents = true;
  DiagnosticEngine diagnostics;
  absl::StatusOr<Function*> backward = Differentiate(module, *forward, options, &diagnostics);
  if (!backward.ok()) {
    // "LINE:COL: message", which the command line prefixes with the file's name.
    for (const Diagnostic& d : diagnostics.Sorted()) {
      if (d.loc.known()) {
        return absl::Status(backward.status().code(),
                            absl::StrCat(d.loc.line, ":", d.loc.col, ": ", d.message));
      }
    }
    return backward.status();
  }
  return (*backward)->name();
}

std::vector<std::string> ReplicatedFloatArguments(const Function& function) {
  std::vector<std::string> out;
  const Block& body = *function.body();
  for (int i = 0; i < body.num_arguments(); ++i) {
    Type type = function.arg_types()[i];
    if (!type.is_tensor() || !IsFloatType(type.element_type()) || type.has_sharding()) continue;
    out.push_back(body.argument(i)->name());
  }
  return out;
}

}  // namespace commir::search
