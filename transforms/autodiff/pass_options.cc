#include "transforms/autodiff/pass_options.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
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

absl::StatusOr<std::vector<std::string>> ValueNameList(absl::string_view list,
                                                       absl::string_view pass,
                                                       absl::string_view option) {
  std::vector<std::string> names;
  if (absl::StripAsciiWhitespace(list).empty()) return names;
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    name = absl::StripAsciiWhitespace(name);
    absl::ConsumePrefix(&name, "%");
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(pass, ": ", option, "=\"", list,
                                                     "\" has an empty name"));
    }
    if (std::any_of(name.begin(), name.end(), absl::ascii_isspace)) {
      return absl::InvalidArgumentError(absl::StrCat(
          pass, ": ", option, " item '", name, "' is not one value name (separate names by ',')"));
    }
    if (!seen.insert(std::string(name)).second) {
      return absl::InvalidArgumentError(absl::StrCat(pass, ": ", option, " names %", name, " twice"));
    }
    names.emplace_back(name);
  }
  return names;
}

}  // namespace commir
