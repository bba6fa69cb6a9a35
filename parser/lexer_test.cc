// Tokens of the text format (docs/language.md, "Lexical structure") with their locations.
#include "parser/lexer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

// "KIND:text@line:col" for every token but the final end of file.
std::vector<std::string> Lex(absl::string_view source) {
  std::vector<std::string> out;
  std::vector<Token> tokens = Tokenize(source);
  EXPECT_FALSE(tokens.empty());
  EXPECT_TRUE(tokens.back().Is(TokenKind::kEof));
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const Token& t = tokens[i];
    out.push_back(std::string(TokenKindName(t.kind)) + ":" + std::string(t.text) + "@" +
                  std::to_string(t.loc.line) + ":" + std::to_string(t.loc.col));
  }
  return out;
}

// Only the kinds and texts.
std::vector<std::string> Texts(absl::string_view source) {
  std::vector<std::string> out;
  for (const Token& t : Tokenize(source)) {
    if (t.Is(TokenKind::kEof)) break;
    out.push_back(std::string(TokenKindName(t.kind)) + ":" + std::string(t.text));
  }
  return out;
}

using ::testing::ElementsAre;

TEST(LexerTest, EmptyAndBlankInputs) {
  EXPECT_THAT(Lex(""), ElementsAre());
  EXPECT_THAT(Lex("  \n\t\r\n // only a comment"), ElementsAre());
  std::vector<Token> tokens = Tokenize("\n\n  ");
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].loc.line, 3);
  EXPECT_EQ(tokens[0].loc.col, 3);
}

TEST(LexerTest, PunctuationAndLocations) {
  EXPECT_THAT(Lex("( ) [ ] { } , : = ->\n  @"),
              ElementsAre("'(':(@1:1", "')':)@1:3", "'[':[@1:5", "']':]@1:7", "'{':{@1:9",
                          "'}':}@1:11", "',':,@1:13", "':'::@1:15", "'=':=@1:17",
                          "'->':->@1:19", "'@':@@2:3"));
}

TEST(LexerTest, CommentsRunToTheEndOfTheLine) {
  EXPECT_THAT(Lex("a // b c\nd//e\n//\nf"),
              ElementsAre("identifier:a@1:1", "identifier:d@2:1", "identifier:f@4:1"));
  // A single slash is not a comment.
  EXPECT_THAT(Texts("a / b"),
              ElementsAre("identifier:a", "invalid token:/", "identifier:b"));
}

TEST(LexerTest, Identifiers) {
  EXPECT_THAT(Texts("func _x A9 a.b.c reduce_sum f32 bf16 x.0"),
              ElementsAre("identifier:func", "identifier:_x", "identifier:A9",
                          "identifier:a.b.c", "identifier:reduce_sum", "identifier:f32",
                          "identifier:bf16", "identifier:x.0"));
}

TEST(LexerTest, ValueNames) {
  EXPECT_THAT(Lex("%x %0 %h.1 %a$b %c-1 %-"),
              ElementsAre("value name:x@1:1", "value name:0@1:4", "value name:h.1@1:7",
                          "value name:a$b@1:12", "value name:c-1@1:17", "value name:-@1:22"));
  // '%' alone is an invalid token.
  EXPECT_THAT(Texts("% x"), ElementsAre("invalid token:%", "identifier:x"));
  // A value name stops at characters it cannot contain.
  EXPECT_THAT(Texts("%a,%b)"), ElementsAre("value name:a", "',':,", "value name:b", "')':)"));
}

TEST(LexerTest, SymbolsAndShardedDimensions) {
  EXPECT_THAT(Texts("@m @mesh_1 @a.b"),
              ElementsAre("symbol:m", "symbol:mesh_1", "symbol:a.b"));
  EXPECT_THAT(Lex("4096@tp"), ElementsAre("integer:4096@1:1", "symbol:tp@1:5"));
  EXPECT_THAT(Texts("4096@(dp, tp)"),
              ElementsAre("integer:4096", "'@':@", "'(':(", "identifier:dp", "',':,",
                          "identifier:tp", "')':)"));
  EXPECT_THAT(Texts("@0"), ElementsAre("'@':@", "integer:0"));
}

TEST(LexerTest, Numbers) {
  EXPECT_THAT(Texts("0 42 -7 +3 1.0 -2.5e-3 1e5 1E+2 6.02e23 1. 1.e5 3.5E-1"),
              ElementsAre("integer:0", "integer:42", "integer:-7", "integer:+3", "float:1.0",
                          "float:-2.5e-3", "float:1e5", "float:1E+2", "float:6.02e23",
                          "float:1.", "float:1.e5", "float:3.5E-1"));
  // inf and nan are identifiers; -inf and +inf are float tokens.
  EXPECT_THAT(Texts("inf -inf +inf nan"),
              ElementsAre("identifier:inf", "float:-inf", "float:+inf", "identifier:nan"));
  // An 'e' without digits is not an exponent; `-info` is not -inf.
  EXPECT_THAT(Texts("2e 2ex -info"),
              ElementsAre("integer:2", "identifier:e", "integer:2", "identifier:ex",
                          "invalid token:-", "identifier:info"));
  EXPECT_THAT(Texts("1.x"), ElementsAre("integer:1", "invalid token:.", "identifier:x"));
  EXPECT_THAT(Texts("- 1"), ElementsAre("invalid token:-", "integer:1"));
}

TEST(LexerTest, Strings) {
  // The token text is the raw body; escapes are undone by the parser.
  EXPECT_THAT(Lex(R"("abc" "" "a\"b\\c")"),
              ElementsAre("string:abc@1:1", "string:@1:7", R"(string:a\"b\\c@1:10)"));
  // Unterminated strings (at end of file, or at the end of the line) are errors.
  EXPECT_THAT(Lex("\"abc\nx"), ElementsAre("invalid token:\"abc@1:1", "identifier:x@2:1"));
  EXPECT_THAT(Texts("\"abc\\"), ElementsAre("invalid token:\"abc\\"));
  EXPECT_THAT(Texts("\"a\\\nb\""),
              ElementsAre("invalid token:\"a\\", "identifier:b", "invalid token:\""));
}

TEST(LexerTest, InvalidCharactersAreSingleTokens) {
  EXPECT_THAT(Lex("# $\xff"),
              ElementsAre("invalid token:#@1:1", "invalid token:$@1:3", "invalid token:\xff@1:4"));
  // A NUL byte is just another invalid character.
  EXPECT_THAT(Texts(absl::string_view("a\0b", 3)),
              ElementsAre("identifier:a", std::string("invalid token:\0", 15), "identifier:b"));
}

// A non-ASCII character is one invalid token (its whole UTF-8 sequence), not a lone
// lead byte; a byte that starts no valid sequence is a token of its own.
TEST(LexerTest, NonAsciiCharactersAreWholeTokens) {
  EXPECT_THAT(Lex("a \xC3\xA9 b \xE2\x82\xAC \xF0\x9F\x98\x80 c"),
              ElementsAre("identifier:a@1:1", "invalid token:\xC3\xA9@1:3", "identifier:b@1:6",
                          "invalid token:\xE2\x82\xAC@1:8", "invalid token:\xF0\x9F\x98\x80@1:12",
                          "identifier:c@1:17"));
  // A truncated sequence, a stray continuation byte, an overlong encoding.
  EXPECT_THAT(Texts("\xC3x \x80 \xC0\xAF"),
              ElementsAre("invalid token:\xC3", "identifier:x", "invalid token:\x80",
                          "invalid token:\xC0", "invalid token:\xAF"));
}

// Lines end at "\n", "\r\n" or a lone "\r"; a lone "\r" also ends comments and strings.
TEST(LexerTest, LoneCarriageReturnsEndLines) {
  EXPECT_THAT(Lex("a\rb\r\nc\n\rd // x\re \"s\rf"),
              ElementsAre("identifier:a@1:1", "identifier:b@2:1", "identifier:c@3:1",
                          "identifier:d@5:1", "identifier:e@6:1", "invalid token:\"s@6:3",
                          "identifier:f@7:1"));
}

// A UTF-8 byte order mark at the start is skipped; columns on line 1 start after it.
TEST(LexerTest, ByteOrderMarkIsSkipped) {
  EXPECT_THAT(Lex("\xEF\xBB\xBF" "func @f"), ElementsAre("identifier:func@1:1", "symbol:f@1:6"));
  // Only at the start of the file.
  EXPECT_THAT(Texts("a \xEF\xBB\xBF"), ElementsAre("identifier:a", "invalid token:\xEF\xBB\xBF"));
}

TEST(LexerTest, ColumnsAreBytesAndLinesFollowNewlines) {
  std::vector<Token> tokens = Tokenize("mesh @m(tp=4)\n\nfunc\n\t%x");
  ASSERT_GE(tokens.size(), 10u);
  EXPECT_EQ(tokens[7].text, "func");
  EXPECT_EQ(tokens[7].loc.line, 3);
  EXPECT_EQ(tokens[7].loc.col, 1);
  EXPECT_EQ(tokens[8].text, "x");
  EXPECT_EQ(tokens[8].loc.line, 4);
  EXPECT_EQ(tokens[8].loc.col, 2);
  EXPECT_TRUE(tokens[9].Is(TokenKind::kEof));
  EXPECT_EQ(tokens[9].loc.line, 4);
  EXPECT_EQ(tokens[9].loc.col, 4);
}

TEST(LexerTest, TokenHelpers) {
  std::vector<Token> tokens = Tokenize("spmd");
  EXPECT_TRUE(tokens[0].IsIdentifier("spmd"));
  EXPECT_FALSE(tokens[0].IsIdentifier("func"));
  EXPECT_TRUE(tokens[0].Is(TokenKind::kIdentifier));
  EXPECT_EQ(TokenKindName(TokenKind::kEof), "end of file");
  EXPECT_EQ(TokenKindName(TokenKind::kArrow), "'->'");
}

// The parser lexes on demand and comes back to saved states: lexing from the state
// before any token reads the same tokens as lexing straight through.
TEST(LexerTest, ResumingFromAStateReadsTheSameTokens) {
  const std::string source =
      "func @f(%x: f32[4]) -> f32[4] { // c\n  %a = mul(%x, 1.5e3) {s = \"}\"}\n"
      "\t%b = add(%a, -2) : f32[4]\r\n  return %b\n}\n% @ 1. 12 1e5 %-x\n";
  std::vector<Token> straight = Tokenize(source);
  std::vector<Lexer::State> states;
  Lexer lexer(source);
  for (size_t i = 0; i < straight.size(); ++i) {
    states.push_back(lexer.state());
    Token t = lexer.Next();
    EXPECT_EQ(t.kind, straight[i].kind);
  }
  EXPECT_TRUE(lexer.Next().Is(TokenKind::kEof));  // the end repeats
  for (size_t i = 0; i < straight.size(); ++i) {
    Lexer resumed(source);
    resumed.set_state(states[i]);
    for (size_t j = i; j < straight.size(); ++j) {
      Token t = resumed.Next();
      ASSERT_TRUE(t.kind == straight[j].kind && t.text == straight[j].text &&
                  t.loc == straight[j].loc)
          << "resumed before token " << i << ", token " << j << ": " << t.text << " vs "
          << straight[j].text;
    }
  }
}

TEST(LexerTest, LargeInputsLexLinearly) {
  std::string big;
  for (int i = 0; i < 200000; ++i) big += "%v" + std::to_string(i) + " = neg(%x) // c\n";
  std::vector<Token> tokens = Tokenize(big);
  EXPECT_EQ(tokens.size(), 200000u * 6 + 1);
  EXPECT_EQ(tokens[tokens.size() - 2].loc.line, 200000);
}

}  // namespace
}  // namespace commir
