#include "parser/body_skipper.h"

#include <cstddef>
#include <vector>

namespace commir {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || (c >= '0' && c <= '9') || c == '.';
}
bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

// The bytes that matter after a line's first token: the rest of a line is scanned for
// these with one table lookup per byte.
struct SpecialTable {
  bool special[256] = {};
  constexpr SpecialTable() {
    for (char c : {'\n', '\r', '{', '}', '"', '/'}) {
      special[static_cast<unsigned char>(c)] = true;
    }
  }
};
constexpr SpecialTable kSpecial;

}  // namespace

// Why bytes suffice: no token spans lines, and no token other than a string holds a
// brace, a quote or "//" (so outside strings every '{' or '}' is a brace token, every
// '"' starts a string and every "//" starts a comment). Whitespace is exactly what the
// lexer skips (' ', '\t', line ends and comments); any other byte belongs to a token.
// Lines end as the lexer ends them: at "\n", "\r\n" or a lone "\r" (a '\r' before a '\n'
// is skipped like a blank, and the '\n' ends the line).
SkipResult SkipFunctionBody(absl::string_view source, const Lexer::State& from,
                            int32_t prev_line) {
  const char* s = source.data();
  const size_t n = source.size();
  size_t pos = from.pos;
  int32_t line = from.line;
  size_t line_start = from.line_start;
  // Whether a token precedes `pos` on its line: the scan starts right after a token (on
  // that token's line) unless it starts at the beginning.
  bool line_has_tokens = prev_line != 0 && prev_line == line;
  int32_t last_token_line = prev_line;
  std::vector<bool> open;  // braces still open; true for a block, false for a line
  while (pos < n) {
    if (!line_has_tokens) {
      // Before the line's first token: trivia, or the token that may start a declaration.
      char c = s[pos];
      if (IsBlank(c)) {
        ++pos;
        continue;
      }
      if (c == '\n' || (c == '\r' && (pos + 1 >= n || s[pos + 1] != '\n'))) {
        ++line;
        line_start = ++pos;
        continue;
      }
      if (c == '\r') {  // before a '\n'
        ++pos;
        continue;
      }
      if (c == '/' && pos + 1 < n && s[pos + 1] == '/') {
        while (pos < n && !IsLineEnd(s[pos])) ++pos;
        continue;
      }
      const int32_t previous_token_line = last_token_line;
      line_has_tokens = true;
      last_token_line = line;
      if (IsIdentStart(c)) {
        size_t end = pos + 1;
        while (end < n && IsIdentChar(s[end])) ++end;
        absl::string_view word(s + pos, end - pos);
        if (word == "mesh" || word == "func" || word == "spmd") {
          return SkipResult{Lexer::State{pos, line, line_start}, previous_token_line};
        }
        while (!open.empty() && !open.back()) open.pop_back();
        pos = end;
        continue;
      }
      while (!open.empty() && !open.back()) open.pop_back();
      // The first token is handled below like any other.
    } else {
      // After the line's first token only braces, strings, comments and the line's end
      // matter.
      while (pos < n && !kSpecial.special[static_cast<unsigned char>(s[pos])]) ++pos;
      if (pos >= n) break;
      if (s[pos] == '\r' && pos + 1 < n && s[pos + 1] == '\n') {
        ++pos;  // the '\n' ends the line
        continue;
      }
      if (IsLineEnd(s[pos])) {
        ++line;
        line_start = ++pos;
        line_has_tokens = false;
        continue;
      }
    }
    char c = s[pos];
    if (c == '{') {
      ++pos;
      bool block = open.empty();  // the body's '{' is a block wherever its line ends
      if (!block) {
        size_t next = pos;
        while (next < n && IsBlank(s[next])) ++next;
        block = next >= n || IsLineEnd(s[next]) ||
                (s[next] == '/' && next + 1 < n && s[next + 1] == '/');
      }
      open.push_back(block);
    } else if (c == '}') {
      ++pos;
      if (!open.empty()) {
        open.pop_back();
        if (open.empty()) return SkipResult{Lexer::State{pos, line, line_start}, line};
      }
    } else if (c == '"') {
      // As the lexer reads a string: to the closing quote, or to the end of the line
      // (an unterminated string); a backslash escapes anything but a newline.
      ++pos;
      while (pos < n && s[pos] != '"' && !IsLineEnd(s[pos])) {
        if (s[pos] == '\\' && pos + 1 < n && !IsLineEnd(s[pos + 1])) ++pos;
        ++pos;
      }
      if (pos < n && s[pos] == '"') ++pos;
    } else if (c == '/' && pos + 1 < n && s[pos + 1] == '/') {
      while (pos < n && !IsLineEnd(s[pos])) ++pos;
    } else {
      ++pos;  // part of some other token; only its being there matters
    }
  }
  return SkipResult{Lexer::State{pos, line, line_start}, last_token_line};
}

}  // namespace commir
