// Recursive-descent parser for CommIR text (docs/language.md) into the SSA graph,
// with type inference for omitted result types and error recovery: it reports every
// error it can recover from, then runs the verifier over what it could build.
#ifndef COMMIR_PARSER_PARSER_H_
#define COMMIR_PARSER_PARSER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"

namespace commir {

struct ParseOptions {
  // Run the verifier after parsing (tools leave it on; parser tests may not).
  bool verify = true;
};

// Parses `source`. Errors go to `diagnostics`; the module is returned only when there
// are none.
std::unique_ptr<Module> ParseModule(absl::string_view source, DiagnosticEngine& diagnostics,
                                    const ParseOptions& options = {});

// Parses and verifies; on failure the status message is the rendered diagnostics
// ("FILE:LINE:COL: error: ..." with source lines and carets).
absl::StatusOr<std::unique_ptr<Module>> ParseModuleOrError(absl::string_view source,
                                                           absl::string_view file_name);

// Reads FILE ("-" for stdin) and parses it.
absl::StatusOr<std::unique_ptr<Module>> ParseFile(const std::string& path);

}  // namespace commir

#endif  // COMMIR_PARSER_PARSER_H_
