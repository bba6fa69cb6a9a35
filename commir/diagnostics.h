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
// Locations hold byte columns (what the lexer counts cheaply); the rendered column
// counts characters (UTF-8 code points; an invalid byte counts as one), as clang and MLIR
// do. Bytes that are not printable UTF-8 are shown escaped (`\x00`, `\xFF`), in the
// message and the quoted line, and a quoted line longer than kMaxQuotedLineChars is cut
// to a window around the caret with `...` marks. Words (runs of non-blank characters)
// of a message longer than kMaxMessageWordChars are cut to their first
// kMaxShownTokenChars characters, and a message still longer than kMaxMessageChars is
// cut there: messages stay short whatever the input.
std::string RenderDiagnostic(absl::string_view file_name, absl::string_view source,
                             const Diagnostic& diagnostic);

inline constexpr int kMaxShownTokenChars = 64;
inline constexpr int kMaxMessageWordChars = 128;
inline constexpr int kMaxQuotedLineChars = 200;
inline constexpr int kMaxMessageChars = 400;

// The length of the well-formed UTF-8 sequence that starts `text` (1 for ASCII), or 0
// if it starts with a byte that begins none (a continuation byte, an overlong form, a
// surrogate, past U+10FFFF, or a truncated sequence).
int Utf8SequenceLength(absl::string_view text);

// `text` (source text: a token, a name) as it should appear inside a message: bytes
// that are not printable UTF-8 escaped, and at most kMaxShownTokenChars characters,
// then `... (N characters)`.
std::string ShownText(absl::string_view text);

// "'é' (U+00E9)" for a well-formed non-ASCII character, "'\x01'" for a control byte,
// "'#'" for a printable one: how to name a character that starts no token.
std::string DescribeCharacter(absl::string_view character);

}  // namespace commir

#endif  // COMMIR_COMMIR_DIAGNOSTICS_H_
