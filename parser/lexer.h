// Tokens of the CommIR text format (docs/language.md, "Lexical structure").
#ifndef COMMIR_PARSER_LEXER_H_
#define COMMIR_PARSER_LEXER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "commir/location.h"

namespace commir {

enum class TokenKind : uint8_t {
  kEof,
  kError,       // a character or literal the lexer cannot read; text says which
  kIdentifier,  // [A-Za-z_][A-Za-z0-9_.]*
  kValueName,   // %name (text excludes '%')
  kSymbol,      // @name (text excludes '@')
  kInteger,
  kFloat,
  kString,      // text is the raw body between the quotes, escapes undone by the parser
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace,
  kComma, kColon, kEqual, kArrow, kAt,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  absl::string_view text;
  Location loc;

  bool Is(TokenKind k) const { return kind == k; }
  bool IsIdentifier(absl::string_view word) const {
    return kind == TokenKind::kIdentifier && text == word;
  }
};

namespace lexer_internal {

// Character classes, one table lookup per byte in the hot loops.
enum CharClass : uint8_t {
  kIdentStart = 1 << 0,     // [A-Za-z_]
  kIdentChar = 1 << 1,      // [A-Za-z0-9_.]
  kValueNameChar = 1 << 2,  // [A-Za-z0-9_.$-]
  kDigit = 1 << 3,          // [0-9]
  kBlank = 1 << 4,          // ' ', '\t' (trivia within a line; '\r' ends a line)
  kPunct = 1 << 5,          // a one-character token: ( ) [ ] { } , : =
};

struct CharTable {
  uint8_t classes[256] = {};
  TokenKind punct_kind[256] = {};
};

constexpr CharTable MakeCharTable() {
  CharTable t;
  for (int c = 0; c < 256; ++c) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    uint8_t k = 0;
    if (alpha) k |= kIdentStart;
    if (alpha || digit || c == '.') k |= kIdentChar;
    if (alpha || digit || c == '.' || c == '$' || c == '-') k |= kValueNameChar;
    if (digit) k |= kDigit;
    if (c == ' ' || c == '\t') k |= kBlank;
    t.classes[c] = k;
  }
  const struct {
    char c;
    TokenKind kind;
  } punct[] = {{'(', TokenKind::kLParen},   {')', TokenKind::kRParen}, {'[', TokenKind::kLBracket},
               {']', TokenKind::kRBracket}, {'{', TokenKind::kLBrace}, {'}', TokenKind::kRBrace},
               {',', TokenKind::kComma},    {':', TokenKind::kColon},  {'=', TokenKind::kEqual}};
  for (const auto& p : punct) {
    t.classes[static_cast<unsigned char>(p.c)] |= kPunct;
    t.punct_kind[static_cast<unsigned char>(p.c)] = p.kind;
  }
  return t;
}

inline constexpr CharTable kCharTable = MakeCharTable();

inline bool HasClass(char c, uint8_t cls) {
  return (kCharTable.classes[static_cast<unsigned char>(c)] & cls) != 0;
}

}  // namespace lexer_internal

// Reads the tokens of `source` one at a time, ending with kEof (repeated if asked
// again). Token texts point into `source`. The parser lexes on demand instead of
// holding every token: a token vector for a large program is many times the size of
// its text, and writing it (and faulting its pages in) cost more than lexing.
// Next() is inline with the common tokens (punctuation, names, identifiers, plain
// integers) on its fast path; the rest goes through NextSlow().
class Lexer {
 public:
  // Where the lexer stands: enough to lex again from there (the parser goes back to
  // declarations it skipped in its first pass, and re-reads broken statements).
  struct State {
    size_t pos = 0;
    int32_t line = 1;
    size_t line_start = 0;
  };

  explicit Lexer(absl::string_view source) : src_(source) { set_state(Start(source)); }

  // Where lexing `source` starts: after a UTF-8 byte order mark if it has one (line 1's
  // columns then count from after it, as the diagnostics renderer does).
  static State Start(absl::string_view source) {
    const size_t skip = source.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    return State{skip, 1, skip};
  }

  Token Next() {
    Token token;
    Next(token);
    return token;
  }
  // Next() into `token`: the parser reads into its current token in place (returning
  // a token and copying it cost as much as lexing it).
  void Next(Token& token) {
    using namespace lexer_internal;
    const char* s = src_.data();
    const size_t n = src_.size();
    // Trivia: blanks and newlines inline; comments on the slow path. Lines end at "\n",
    // "\r\n" or a lone "\r" (the '\r' test comes after the common cases).
    while (pos_ < n) {
      char c = s[pos_];
      if (HasClass(c, kBlank)) {
        ++pos_;
      } else if (c == '\n') {
        ++line_;
        line_start_ = ++pos_;
      } else if (c == '\r') {
        ++pos_;
        if (pos_ >= n || s[pos_] != '\n') {
          ++line_;
          line_start_ = pos_;
        }
      } else {
        break;
      }
    }
    if (pos_ >= n) return Set(token, TokenKind::kEof, {}, Here());
    const char c = s[pos_];
    const uint8_t cls = kCharTable.classes[static_cast<unsigned char>(c)];
    const size_t start = pos_;
    if (cls & kPunct) {
      ++pos_;
      return Set(token, kCharTable.punct_kind[static_cast<unsigned char>(c)],
                 src_.substr(start, 1),
                 Location{line_, static_cast<int32_t>(start - line_start_) + 1});
    }
    if (c == '%' && pos_ + 1 < n && HasClass(s[pos_ + 1], kValueNameChar)) {
      size_t end = pos_ + 2;
      while (end < n && HasClass(s[end], kValueNameChar)) ++end;
      pos_ = end;
      return Set(token, TokenKind::kValueName, src_.substr(start + 1, end - start - 1),
                 Location{line_, static_cast<int32_t>(start - line_start_) + 1});
    }
    if (cls & kIdentStart) {
      size_t end = pos_ + 1;
      while (end < n && HasClass(s[end], kIdentChar)) ++end;
      pos_ = end;
      return Set(token, TokenKind::kIdentifier, src_.substr(start, end - start),
                 Location{line_, static_cast<int32_t>(start - line_start_) + 1});
    }
    if (cls & kDigit) {
      // A plain integer: digits not followed by '.', 'e' or 'E' (LexNumber does the rest).
      size_t end = pos_ + 1;
      while (end < n && HasClass(s[end], kDigit)) ++end;
      if (end >= n || (s[end] != '.' && s[end] != 'e' && s[end] != 'E')) {
        pos_ = end;
        return Set(token, TokenKind::kInteger, src_.substr(start, end - start),
                   Location{line_, static_cast<int32_t>(start - line_start_) + 1});
      }
    }
    token = NextSlow();
  }

  State state() const { return State{pos_, line_, line_start_}; }
  void set_state(const State& state) {
    pos_ = state.pos;
    line_ = state.line;
    line_start_ = state.line_start;
  }
  // The byte offset the next token (or the trivia before it) starts at.
  size_t offset() const { return pos_; }

 private:
  static void Set(Token& token, TokenKind kind, absl::string_view text, Location loc) {
    token.kind = kind;
    token.text = text;
    token.loc = loc;
  }
  // Next() for whatever its fast path does not handle (comments included).
  Token NextSlow();
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  void Advance(size_t n = 1);
  Location Here() const {
    return Location{line_, static_cast<int32_t>(pos_ - line_start_) + 1};
  }
  void SkipTrivia();
  Token Make(TokenKind kind, size_t start, Location loc) const {
    return Token{kind, src_.substr(start, pos_ - start), loc};
  }
  Token LexPrefixed(TokenKind kind, bool (*is_char)(char), Location loc);
  Token LexNumber(Location loc);
  bool IsExponent(size_t at) const;
  Token LexString(Location loc);

  absl::string_view src_;
  size_t pos_ = 0;
  int32_t line_ = 1;
  size_t line_start_ = 0;
};

// Splits `source` into tokens, ending with kEof. Token texts point into `source`.
std::vector<Token> Tokenize(absl::string_view source);

absl::string_view TokenKindName(TokenKind kind);

}  // namespace commir

#endif  // COMMIR_PARSER_LEXER_H_
