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

#include "commir/ir.h"

namespace commir {

std::string PrintModule(const Module& module);
std::string PrintFunction(const Function& function);

}  // namespace commir

#endif  // COMMIR_COMMIR_PRINTER_H_
