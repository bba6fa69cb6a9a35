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

int Utf8SequenceLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  int length;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (text.size() < static_cast<size_t>(length)) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (int i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

namespace {

constexpr absl::string_view kByteOrderMark = "\xEF\xBB\xBF";

bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

// One character of source or message text: its bytes, and whether it is shown as an
// escape (`\xHH`: a byte that is not printable UTF-8) rather than as written.
struct Char {
  absl::string_view bytes;
  bool escaped = false;

  bool Is(char c) const { return !escaped && bytes.size() == 1 && bytes[0] == c; }
  // Columns it takes on a terminal: an escape is four, any other character one.
  size_t width() const { return escaped ? 4 : 1; }
  void AppendTo(std::string& out) const {
    if (escaped) {
      absl::StrAppendFormat(&out, "\\x%02X", static_cast<unsigned char>(bytes[0]));
    } else {
      out.append(bytes.data(), bytes.size());
    }
  }
};

// The character that starts `text` (not empty). Tabs and newlines are kept as they are
// (the caret line reuses tabs; messages may hold newlines); other control bytes, DEL and
// bytes that are not well-formed UTF-8 are escaped.
Char FirstChar(absl::string_view text) {
  int length = Utf8SequenceLength(text);
  const unsigned char c = static_cast<unsigned char>(text[0]);
  if (length == 0 || (length == 1 && ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F))) {
    return Char{text.substr(0, 1), true};
  }
  return Char{text.substr(0, length), false};
}

std::vector<Char> SplitChars(absl::string_view text) {
  std::vector<Char> chars;
  for (size_t i = 0; i < text.size(); i += chars.back().bytes.size()) {
    chars.push_back(FirstChar(text.substr(i)));
  }
  return chars;
}

size_t CountChars(absl::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); i += FirstChar(text.substr(i)).bytes.size()) ++count;
  return count;
}

std::string Join(const std::vector<Char>& chars, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) chars[i].AppendTo(out);
  return out;
}

// `chars` shown whole, or cut to their first kMaxShownTokenChars and their count.
std::string Shorten(const std::vector<Char>& chars, size_t begin, size_t end) {
  if (end - begin <= static_cast<size_t>(kMaxShownTokenChars)) return Join(chars, begin, end);
  return absl::StrCat(Join(chars, begin, begin + kMaxShownTokenChars), "... (", end - begin,
                      " characters)");
}

// The message with bytes escaped and over-long words cut (see RenderDiagnostic).
std::string SafeMessage(absl::string_view message) {
  std::vector<Char> chars = SplitChars(message);
  std::string out;
  size_t i = 0;
  while (i < chars.size()) {
    size_t end = i;
    while (end < chars.size() && !chars[end].Is(' ') && !chars[end].Is('\n')) ++end;
    if (end - i > static_cast<size_t>(kMaxMessageWordChars)) {
      out += Shorten(chars, i, end);
    } else {
      out += Join(chars, i, end);
    }
    if (end < chars.size()) chars[end].AppendTo(out);
    i = end + 1;
  }
  // A message of many short words (a long quoted string with blanks) is cut whole.
  if (CountChars(out) > static_cast<size_t>(kMaxMessageChars)) {
    size_t cut = 0;
    for (int k = 0; k < kMaxMessageChars; ++k) {
      cut += FirstChar(absl::string_view(out).substr(cut)).bytes.size();
    }
    out = absl::StrCat(out.substr(0, cut), "... (message of ", chars.size(), " characters)");
  }
  return out;
}

// The text of the line starting at `start`, without its line ending.
absl::string_view LineAt(absl::string_view source, size_t start) {
  size_t end = start;
  while (end < source.size() && !IsLineEnd(source[end])) ++end;
  return source.substr(start, end - start);
}

// Offsets of the starts of the lines of `source` (index 0 is line 1), as the lexer
// counts them: lines end at "\n", "\r\n" or a lone "\r", and line 1 starts after a
// byte order mark.
std::vector<size_t> LineStarts(absl::string_view source) {
  std::vector<size_t> starts = {source.substr(0, 3) == kByteOrderMark ? 3u : 0u};
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\n') {
      starts.push_back(i + 1);
    } else if (source[i] == '\r' && (i + 1 >= source.size() || source[i + 1] != '\n')) {
      starts.push_back(i + 1);
    }
  }
  return starts;
}

std::string RenderOne(absl::string_view file_name, absl::string_view source,
                      const std::vector<size_t>& line_starts, const Diagnostic& diagnostic) {
  const Location& loc = diagnostic.loc;
  const std::string message = SafeMessage(diagnostic.message);
  if (!loc.known()) return absl::StrFormat("%s: error: %s\n", file_name, message);
  absl::string_view line;
  if (static_cast<size_t>(loc.line) <= line_starts.size()) {
    line = LineAt(source, line_starts[loc.line - 1]);
  }
  // The byte column as a character index into the line (columns past the line's end,
  // such as the end of file, stay past it).
  const size_t byte_index = loc.col > 0 ? static_cast<size_t>(loc.col - 1) : 0;
  const size_t chars_before = CountChars(line.substr(0, std::min(byte_index, line.size())));
  const size_t caret = chars_before + (byte_index > line.size() ? byte_index - line.size() : 0);
  std::string out = absl::StrFormat("%s:%d:%d: error: %s\n", file_name, loc.line,
                                    static_cast<int64_t>(caret) + 1, message);
  // The characters to quote: the whole line if short enough, else kMaxQuotedLineChars
  // around the caret. Only those are split (a line may be megabytes long).
  const size_t total = chars_before + CountChars(line.substr(std::min(byte_index, line.size())));
  const size_t window = kMaxQuotedLineChars;
  size_t begin = 0, end = total;
  if (total > window) {
    begin = caret > window / 2 ? caret - window / 2 : 0;
    end = std::min(total, begin + window);
    if (end == total) begin = end - window;
  }
  size_t begin_byte = 0;
  for (size_t i = 0; i < begin; ++i) begin_byte += FirstChar(line.substr(begin_byte)).bytes.size();
  std::vector<Char> chars;
  for (size_t i = begin, at = begin_byte; i < end; ++i) {
    chars.push_back(FirstChar(line.substr(at)));
    at += chars.back().bytes.size();
  }
  const bool cut_front = begin > 0, cut_back = end < total;
  absl::StrAppend(&out, cut_front ? "..." : "", Join(chars, 0, chars.size()),
                  cut_back ? "..." : "", "\n");
  // Keep tabs in the caret line so the caret lines up under tab-indented source; an
  // escaped byte takes as many columns as its escape.
  std::string caret_line = cut_front ? "   " : "";
  for (size_t i = begin; i < caret && i < end; ++i) {
    const Char& c = chars[i - begin];
    if (c.Is('\t')) {
      caret_line.push_back('\t');
    } else {
      caret_line.append(c.width(), ' ');
    }
  }
  absl::StrAppend(&out, caret_line, "^\n");
  return out;
}

}  // namespace

std::string ShownText(absl::string_view text) {
  std::vector<Char> chars = SplitChars(text);
  return Shorten(chars, 0, chars.size());
}

std::string DescribeCharacter(absl::string_view character) {
  const unsigned char lead = character.empty() ? 0 : static_cast<unsigned char>(character[0]);
  if (character.size() <= 1 || lead < 0x80) return absl::StrCat("'", ShownText(character), "'");
  // Decode the code point of a well-formed sequence (the lexer makes one token of it).
  uint32_t code = lead & (character.size() == 2 ? 0x1F : character.size() == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < character.size(); ++i) {
    code = (code << 6) | (static_cast<unsigned char>(character[i]) & 0x3F);
  }
  return absl::StrFormat("'%s' (U+%04X)", ShownText(character), code);
}

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
