#include "transforms/autodiff/pass_options.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace commir {

absl::StatusOr<std::vector<Function*>> PickFunctions(Module& module, absl::string_view func,
                                                     absl::string_view pass) {
  absl::ConsumePrefix(&func, "@");
  std::vector<Function*> picked;
  for (Function* f : module.functions()) {
    if (func.empty() ? !f->is_spmd() : f->name() == func) picked.push_back(f);
  }
  if (!func.empty() && picked.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(pass, ": func names @", func, ", which the module does not define"));
  }
  return picked;
}

std::vector<std::string> ValueNameList(absl::string_view list) {
  std::vector<std::string> names;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    name = absl::StripAsciiWhitespace(name);
    absl::ConsumePrefix(&name, "%");
    names.emplace_back(name);
  }
  return names;
}

}  // namespace commir
