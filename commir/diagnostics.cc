#include "commir/diagnostics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace commir {

void DiagnosticEngine::Error(Location loc, std::string message) {
  if (!seen_.emplace(loc.line, loc.col, message).second) return;
  diagnostics_.push_back({loc, std::move(message)});
}

std::vector<Diagnostic> DiagnosticEngine::Sorted() const {
  std::vector<Diagnostic> sorted = diagnostics_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Diagnostic& a, const Diagnostic& b) { return a.loc < b.loc; });
  return sorted;
}

namespace {

// The text of the line starting at `start`, without its newline.
absl::string_view LineAt(absl::string_view source, size_t start) {
  size_t end = source.find('\n', start);
  if (end == absl::string_view::npos) end = source.size();
  absl::string_view text = source.substr(start, end - start);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  return text;
}

// Offsets of the starts of the lines of `source` (index 0 is line 1).
std::vector<size_t> LineStarts(absl::string_view source) {
  std::vector<size_t> starts = {0};
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\n') starts.push_back(i + 1);
  }
  return starts;
}

std::string RenderOne(absl::string_view file_name, absl::string_view source,
                      const std::vector<size_t>& line_starts, const Diagnostic& diagnostic) {
  const Location& loc = diagnostic.loc;
  if (!loc.known()) return absl::StrFormat("%s: error: %s\n", file_name, diagnostic.message);
  std::string out =
      absl::StrFormat("%s:%d:%d: error: %s\n", file_name, loc.line, loc.col, diagnostic.message);
  absl::string_view line;
  if (static_cast<size_t>(loc.line) <= line_starts.size()) {
    line = LineAt(source, line_starts[loc.line - 1]);
  }
  absl::StrAppend(&out, line, "\n");
  // Keep tabs in the caret line so the caret lines up under tab-indented source.
  std::string caret;
  for (int i = 1; i < loc.col && i - 1 < static_cast<int>(line.size()); ++i) {
    caret.push_back(line[i - 1] == '\t' ? '\t' : ' ');
  }
  absl::StrAppend(&out, caret, "^\n");
  return out;
}

}  // namespace

std::string RenderDiagnostic(absl::string_view file_name, absl::string_view source,
                             const Diagnostic& diagnostic) {
  return RenderOne(file_name, source, LineStarts(source), diagnostic);
}

std::string DiagnosticEngine::Render(absl::string_view file_name,
                                     absl::string_view source) const {
  // Index the lines once: rendering many errors of a large file stays linear.
  std::vector<size_t> line_starts = LineStarts(source);
  std::string out;
  for (const Diagnostic& diagnostic : Sorted()) {
    absl::StrAppend(&out, RenderOne(file_name, source, line_starts, diagnostic));
  }
  return out;
}

absl::Status DiagnosticEngine::ToStatus(absl::string_view file_name,
                                        absl::string_view source) const {
  if (!has_errors()) return absl::OkStatus();
  return absl::InvalidArgumentError(Render(file_name, source));
}

}  // namespace commir
