// SkipFunctionBody against the token loop it replaces (kept here as the reference),
// from every token of real programs and of generated, mostly malformed, text.
#include "parser/body_skipper.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "parser/lexer.h"

namespace commir {
namespace {

struct LexedToken {
  Lexer::State before;  // the lexer state this token was read from
  Token token;
};

std::vector<LexedToken> LexAll(absl::string_view source) {
  std::vector<LexedToken> out;
  Lexer lexer(source);
  while (true) {
    Lexer::State before = lexer.state();
    Token token = lexer.Next();
    out.push_back({before, token});
    if (token.Is(TokenKind::kEof)) return out;
  }
}

// The parser's former token loop: from token `i`, the index of the token it stops at.
size_t ReferenceSkip(const std::vector<LexedToken>& t, size_t i) {
  auto first_on_line = [&](size_t k) { return k == 0 || t[k - 1].token.loc.line != t[k].token.loc.line; };
  auto decl_start = [&](size_t k) {
    return t[k].token.IsIdentifier("mesh") || t[k].token.IsIdentifier("func") ||
           t[k].token.IsIdentifier("spmd");
  };
  std::vector<bool> open;
  for (; !t[i].token.Is(TokenKind::kEof); ++i) {
    if (decl_start(i) && first_on_line(i)) return i;
    if (first_on_line(i)) {
      while (!open.empty() && !open.back()) open.pop_back();
    }
    if (t[i].token.Is(TokenKind::kLBrace)) {
      const Token& next = t[i + 1].token;
      open.push_back(open.empty() || next.Is(TokenKind::kEof) ||
                     next.loc.line != t[i].token.loc.line);
    } else if (t[i].token.Is(TokenKind::kRBrace) && !open.empty()) {
      open.pop_back();
      if (open.empty()) return i + 1;
    }
  }
  return i;
}

// Checks SkipFunctionBody from every token of `source`; returns the number of starts.
int CheckEveryStart(const std::string& source) {
  std::vector<LexedToken> tokens = LexAll(source);
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t prev_line = i == 0 ? 0 : tokens[i - 1].token.loc.line;
    SkipResult got = SkipFunctionBody(source, tokens[i].before, prev_line);
    size_t want = ReferenceSkip(tokens, i);
    Lexer lexer(source);
    lexer.set_state(got.resume);
    Token next = lexer.Next();
    const Token& expected = tokens[want].token;
    EXPECT_TRUE(next.kind == expected.kind && next.text == expected.text &&
                next.loc == expected.loc)
        << "from token " << i << " (" << tokens[i].token.loc.line << ":"
        << tokens[i].token.loc.col << "), expected to stop at " << expected.loc.line << ":"
        << expected.loc.col << ", stopped at " << next.loc.line << ":" << next.loc.col
        << "\n--- source ---\n" << source;
    int32_t want_prev = want == 0 ? 0 : tokens[want - 1].token.loc.line;
    // Only whether the stop token begins its line is observable, except after a '}'.
    if (want > 0 && tokens[want - 1].token.Is(TokenKind::kRBrace)) {
      EXPECT_EQ(got.prev_line, want_prev) << source;
    } else {
      EXPECT_EQ(got.prev_line == 0 || got.prev_line != expected.loc.line,
                want_prev == 0 || want_prev != expected.loc.line)
          << source;
    }
    if (::testing::Test::HasFailure()) return static_cast<int>(i);
  }
  return static_cast<int>(tokens.size());
}

TEST(BodySkipperTest, HandWrittenCases) {
  const char* cases[] = {
      "func @f(%x: f32[4]) -> f32[4] {\n  return %x\n}\nfunc @g() {\n}\n",
      "func @f() {\n  %a = full() {value = 1.0} : f32[4]\n  return\n}\n",
      // An attribute dictionary left open is closed at the end of its line.
      "func @f() {\n  %a = full() {value = 1.0 : f32[4]\n  return\n}\nmesh @m(a=2)\n",
      // A missing '}' ends at the next declaration that begins a line.
      "func @f() {\n  %a = add(%x, %y)\nfunc @g() {\n}\n  func @h() {}\n",
      // Braces in strings and comments are not braces.
      "func @f() { // {{{\n  %a = op() {s = \"}{\\\"}\"}\n  \"unterminated {\n}\n x",
      "func @f() {\n  for %i = 0 to 4 {\n    yield\n  } : index\n  return\n} trailing\n",
      "func @f() { return }\nspmd func @g() {\n}\n",
      "func\nmesh @m(a=2)\n{ } }\n",
      "{\n{\n}\n}\n}\n",
      "  funcx {\n func.x }\n spmd\n",
      "{ /x\r\n}\t\r{ //\n}",
      // Lone '\r' ends lines (and comments and strings) as '\n' does.
      "func @f() {\r  %a = op() { \"\r}\r  // }\r}\rfunc @g() {\r\n}\r",
      // A nested '{' followed only by a comment ends its line: it opens a block.
      "func @f() {\n  %a = op() { // c\n  return\n}\n}\nfunc @g() {\n}\n",
      "",
      "}",
      "{",
  };
  for (const char* source : cases) {
    CheckEveryStart(source);
    if (HasFailure()) return;
  }
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(BodySkipperTest, ProgramsInTheRepository) {
  int files = 0;
  for (const char* dir : {"testdata/examples", "parser/fuzz_corpus"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".commir") continue;
      CheckEveryStart(ReadFile(entry.path()));
      if (HasFailure()) return;
      ++files;
    }
  }
  EXPECT_GT(files, 10);
}

// Random text over fragments that matter to the skip (braces, quotes, escapes,
// comments, newlines, keywords) and some that do not.
TEST(BodySkipperTest, GeneratedText) {
  const char* fragments[] = {"{", "}", "\"", "\\", "\n", "\r", "\t", " ", "//", "/",
                             "func", "mesh", "spmd", "funcs", "func.x", "%v", "@f",
                             "(", ")", "=", "1.5", "-inf", "yield", "x", "\0"};
  std::mt19937 rng(12345);
  for (int round = 0; round < 20000; ++round) {
    std::string source;
    int length = static_cast<int>(rng() % 40);
    for (int k = 0; k < length; ++k) {
      size_t pick = rng() % (sizeof(fragments) / sizeof(fragments[0]));
      source += pick + 1 == sizeof(fragments) / sizeof(fragments[0]) ? std::string(1, '\0')
                                                                      : fragments[pick];
    }
    CheckEveryStart(source);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace commir
