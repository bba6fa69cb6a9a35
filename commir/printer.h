// The canonical printer: deterministic text that the parser reads back to the same
// module, so that printing the parse of printed text reproduces it byte for byte.
//
// Canonical choices: two-space indentation, one blank line between declarations,
// `on @mesh` always written when the function has a mesh, result types always written,
// attributes in the op's schema order followed by `stream`, `true` flags written as a
// bare key, value names kept as written (unnamed values numbered %0, %1, ... and
// clashes renamed with a numeric suffix).
#ifndef COMMIR_COMMIR_PRINTER_H_
#define COMMIR_COMMIR_PRINTER_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"

#include "commir/ir.h"

namespace commir {

std::string PrintModule(const Module& module);
std::string PrintFunction(const Function& function);

// Gives every value of `function` the name the printer prints it with (a number for an
// unnamed value, a suffix for a clash), so that the function has the names its printed
// and parsed form would have; printing it is unchanged. For code that copies a function
// instead of printing and parsing it and must then agree with its text.
void NameValuesAsPrinted(Function& function);

// The entries of an op's attribute dictionary as the printer writes them ("causal",
// "dim = 1", "stream = %s"): schema attributes in schema order, then keys the schema does
// not know (invalid IR, shown for debugging) sorted, then the stream, a `stream = %v`
// operand named by `value_name`. A loop's bounds are left out with `skip_loop_bounds`
// (its header shows them). Shared by the text and the dot printer.
std::vector<std::string> AttributeEntries(const Operation& op, bool skip_loop_bounds,
                                          absl::FunctionRef<std::string(const Value*)> value_name);

}  // namespace commir

#endif  // COMMIR_COMMIR_PRINTER_H_
