#include "parser/lexer.h"

#include <algorithm>

#include "commir/diagnostics.h"

namespace commir {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c) || c == '.'; }
bool IsValueNameChar(char c) {
  return IsIdentStart(c) || IsDigit(c) || c == '.' || c == '$' || c == '-';
}

}  // namespace

void Lexer::Advance(size_t n) {
  for (size_t i = 0; i < n && pos_ < src_.size(); ++i) {
    if (src_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }
}

void Lexer::SkipTrivia() {
  while (pos_ < src_.size()) {
    char c = src_[pos_];
    if (c == ' ' || c == '\t') {
      ++pos_;
    } else if (c == '\n') {
      ++line_;
      line_start_ = ++pos_;
    } else if (c == '\r') {  // "\r\n" ends a line at its '\n'; a lone '\r' ends one
      ++pos_;
      if (Peek() != '\n') {
        ++line_;
        line_start_ = pos_;
      }
    } else if (c == '/' && Peek(1) == '/') {
      while (pos_ < src_.size() && src_[pos_] != '\n' && src_[pos_] != '\r') ++pos_;
    } else {
      break;
    }
  }
}

Token Lexer::NextSlow() {
  SkipTrivia();
  Location loc = Here();
  size_t start = pos_;
  if (pos_ >= src_.size()) return Token{TokenKind::kEof, {}, loc};
  char c = src_[pos_];
  // Single-character tokens (none is a newline, so no line bookkeeping).
  switch (c) {
    case '(': ++pos_; return Make(TokenKind::kLParen, start, loc);
    case ')': ++pos_; return Make(TokenKind::kRParen, start, loc);
    case '[': ++pos_; return Make(TokenKind::kLBracket, start, loc);
    case ']': ++pos_; return Make(TokenKind::kRBracket, start, loc);
    case '{': ++pos_; return Make(TokenKind::kLBrace, start, loc);
    case '}': ++pos_; return Make(TokenKind::kRBrace, start, loc);
    case ',': ++pos_; return Make(TokenKind::kComma, start, loc);
    case ':': ++pos_; return Make(TokenKind::kColon, start, loc);
    case '=': ++pos_; return Make(TokenKind::kEqual, start, loc);
    case '"': return LexString(loc);
    case '%': return LexPrefixed(TokenKind::kValueName, IsValueNameChar, loc);
    case '@':
      if (IsIdentStart(Peek(1))) return LexPrefixed(TokenKind::kSymbol, IsIdentChar, loc);
      Advance();
      return Make(TokenKind::kAt, start, loc);
    case '-':
      if (Peek(1) == '>') {
        Advance(2);
        return Make(TokenKind::kArrow, start, loc);
      }
      [[fallthrough]];
    case '+':
      if (IsDigit(Peek(1))) return LexNumber(loc);
      if (src_.substr(pos_ + 1, 3) == "inf" && !IsIdentChar(Peek(4))) {
        Advance(4);
        return Make(TokenKind::kFloat, start, loc);
      }
      Advance();
      return Make(TokenKind::kError, start, loc);
    default: break;
  }
  if (IsDigit(c)) return LexNumber(loc);
  if (IsIdentStart(c)) {
    while (pos_ < src_.size() && IsIdentChar(src_[pos_])) ++pos_;
    return Make(TokenKind::kIdentifier, start, loc);
  }
  // A character that starts no token: a non-ASCII one is one token of all its bytes, so
  // that the error names it whole; a byte that starts no UTF-8 sequence is one alone.
  pos_ += std::max(Utf8SequenceLength(src_.substr(pos_)), 1);
  return Make(TokenKind::kError, start, loc);
}

Token Lexer::LexPrefixed(TokenKind kind, bool (*is_char)(char), Location loc) {
  ++pos_;  // the sigil
  size_t start = pos_;
  while (pos_ < src_.size() && is_char(src_[pos_])) ++pos_;
  if (pos_ == start) return Token{TokenKind::kError, src_.substr(start - 1, 1), loc};
  return Token{kind, src_.substr(start, pos_ - start), loc};
}

Token Lexer::LexNumber(Location loc) {
  size_t start = pos_;
  if (src_[pos_] == '-' || src_[pos_] == '+') ++pos_;
  while (IsDigit(Peek())) ++pos_;
  bool is_float = false;
  if (Peek() == '.' && IsDigit(Peek(1))) {
    is_float = true;
    ++pos_;
    while (IsDigit(Peek())) ++pos_;
  } else if (Peek() == '.' && (!IsIdentStart(Peek(1)) || IsExponent(pos_ + 1))) {
    is_float = true;  // "1." and "1.e5" are floats
    ++pos_;
  }
  if (IsExponent(pos_)) {
    is_float = true;
    ++pos_;  // 'e'
    if (Peek() == '+' || Peek() == '-') ++pos_;
    while (IsDigit(Peek())) ++pos_;
  }
  return Make(is_float ? TokenKind::kFloat : TokenKind::kInteger, start, loc);
}

// Whether an exponent like `e5`, `E-3` starts at `at`.
bool Lexer::IsExponent(size_t at) const {
  if (at >= src_.size() || (src_[at] != 'e' && src_[at] != 'E')) return false;
  ++at;
  if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
  return at < src_.size() && IsDigit(src_[at]);
}

Token Lexer::LexString(Location loc) {
  size_t start = pos_;
  ++pos_;
  // A string ends at its line's end ('\n' or '\r') if not before.
  while (pos_ < src_.size() && src_[pos_] != '"' && src_[pos_] != '\n' && src_[pos_] != '\r') {
    if (src_[pos_] == '\\' && pos_ + 1 < src_.size() && src_[pos_ + 1] != '\n' &&
        src_[pos_ + 1] != '\r') {
      ++pos_;
    }
    ++pos_;
  }
  if (pos_ >= src_.size() || src_[pos_] != '"') {
    return Token{TokenKind::kError, src_.substr(start, pos_ - start), loc};
  }
  ++pos_;
  return Token{TokenKind::kString, src_.substr(start + 1, pos_ - start - 2), loc};
}

std::vector<Token> Tokenize(absl::string_view source) {
  std::vector<Token> tokens;
  // Programs average about three bytes per token; reserving for two makes regrowth (a
  // copy of every token so far) rare.
  tokens.reserve(source.size() / 2 + 1);
  Lexer lexer(source);
  while (true) {
    tokens.push_back(lexer.Next());
    if (tokens.back().kind == TokenKind::kEof) break;
  }
  return tokens;
}

absl::string_view TokenKindName(TokenKind kind) {
  switch (kind) {
    case TokenKind::kEof: return "end of file";
    case TokenKind::kError: return "invalid token";
    case TokenKind::kIdentifier: return "identifier";
    case TokenKind::kValueName: return "value name";
    case TokenKind::kSymbol: return "symbol";
    case TokenKind::kInteger: return "integer";
    case TokenKind::kFloat: return "float";
    case TokenKind::kString: return "string";
    case TokenKind::kLParen: return "'('";
    case TokenKind::kRParen: return "')'";
    case TokenKind::kLBracket: return "'['";
    case TokenKind::kRBracket: return "']'";
    case TokenKind::kLBrace: return "'{'";
    case TokenKind::kRBrace: return "'}'";
    case TokenKind::kComma: return "','";
    case TokenKind::kColon: return "':'";
    case TokenKind::kEqual: return "'='";
    case TokenKind::kArrow: return "'->'";
    case TokenKind::kAt: return "'@'";
  }
  return "token";
}

}  // namespace commir
