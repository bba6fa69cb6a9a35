// Tokens of the CommIR text format (spec section 1).
#ifndef COMMIR_PARSER_LEXER_H_
#define COMMIR_PARSER_LEXER_H_

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

// Splits `source` into tokens, ending with kEof. Token texts point into `source`.
std::vector<Token> Tokenize(absl::string_view source);

absl::string_view TokenKindName(TokenKind kind);

}  // namespace commir

#endif  // COMMIR_PARSER_LEXER_H_
