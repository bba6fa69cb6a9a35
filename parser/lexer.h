// Tokens of the CommIR text format (spec section 1).
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

// Reads the tokens of `source` one at a time, ending with kEof (repeated if asked
// again). Token texts point into `source`. The parser lexes on demand instead of
// holding every token: a token vector for a large program is many times the size of
// its text, and writing it (and faulting its pages in) cost more than lexing.
class Lexer {
 public:
  // Where the lexer stands: enough to lex again from there (the parser goes back to
  // declarations it skipped in its first pass, and re-reads broken statements).
  struct State {
    size_t pos = 0;
    int32_t line = 1;
    size_t line_start = 0;
  };

  explicit Lexer(absl::string_view source) : src_(source) {}

  Token Next();

  State state() const { return State{pos_, line_, line_start_}; }
  void set_state(const State& state) {
    pos_ = state.pos;
    line_ = state.line;
    line_start_ = state.line_start;
  }
  // The byte offset the next token (or the trivia before it) starts at.
  size_t offset() const { return pos_; }

 private:
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
