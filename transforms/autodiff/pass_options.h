// What the autodiff and training-step passes read from their options alike.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_PASS_OPTIONS_H_
#define COMMIR_TRANSFORMS_AUTODIFF_PASS_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"

namespace commir {

// The functions a `func` option picks: "" every global function, "@f" (or "f") that one.
// Naming a function the module does not define is an error that names `pass`.
absl::StatusOr<std::vector<Function*>> PickFunctions(Module& module, absl::string_view func,
                                                     absl::string_view pass);

// A comma-separated list of value names, each with or without its '%': "%w1, w2" gives
// {"w1", "w2"}; "" gives none. An empty item (",,", a trailing comma), a name holding a
// space and a name given twice are errors that name `pass` and `option`: a repeated
// name would otherwise mean what the single one does (or, for a gradient, twice it).
absl::StatusOr<std::vector<std::string>> ValueNameList(absl::string_view list,
                                                       absl::string_view pass,
                                                       absl::string_view option);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_PASS_OPTIONS_H_
