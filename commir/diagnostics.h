// Collection and rendering of user-facing errors:
//   FILE:LINE:COL: error: MESSAGE
//   <the source line>
//   <caret under the column>
#ifndef COMMIR_COMMIR_DIAGNOSTICS_H_
#define COMMIR_COMMIR_DIAGNOSTICS_H_

#include <string>
#include <tuple>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "commir/location.h"

namespace commir {

struct Diagnostic {
  Location loc;
  std::string message;
};

// Accumulates diagnostics, dropping exact duplicates (the parser and the verifier may
// find the same problem), and renders them in source order.
class DiagnosticEngine {
 public:
  void Error(Location loc, std::string message);
  bool has_errors() const { return !diagnostics_.empty(); }
  size_t size() const { return diagnostics_.size(); }
  // Diagnostics sorted by location (stable for equal locations).
  std::vector<Diagnostic> Sorted() const;

  // Renders every diagnostic against `source` (the file's text) with the source line and
  // a caret. `file_name` is printed as given.
  std::string Render(absl::string_view file_name, absl::string_view source) const;

  // A single InvalidArgument status whose message is the rendered text (or OK).
  absl::Status ToStatus(absl::string_view file_name, absl::string_view source) const;

 private:
  std::vector<Diagnostic> diagnostics_;
  // (line, col, message) of every diagnostic, for O(1) duplicate checks.
  absl::flat_hash_set<std::tuple<int32_t, int32_t, std::string>> seen_;
};

// Renders one diagnostic; exposed for tools that report a single error.
std::string RenderDiagnostic(absl::string_view file_name, absl::string_view source,
                             const Diagnostic& diagnostic);

}  // namespace commir

#endif  // COMMIR_COMMIR_DIAGNOSTICS_H_
