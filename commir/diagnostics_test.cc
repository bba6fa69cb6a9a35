// Rendering of diagnostics: character columns, escaping, truncation, line endings.
#include "commir/diagnostics.h"

#include <string>

#include "gtest/gtest.h"

namespace commir {
namespace {

std::string RenderAt(absl::string_view source, Location loc, std::string message) {
  return RenderDiagnostic("f.commir", source, Diagnostic{loc, std::move(message)});
}

// Messages made elsewhere (the verifier, passes) are made safe when rendered: bytes
// that are not printable UTF-8 are escaped, and very long words are cut.
TEST(DiagnosticsTest, MessagesAreEscapedAndLongWordsCut) {
  static const char kMessage[] = "bad \0 \xFF \x1B[31m caf\xC3\xA9";
  EXPECT_EQ(RenderAt("x\n", {1, 1}, std::string(kMessage, sizeof(kMessage) - 1)),
            "f.commir:1:1: error: bad \\x00 \\xFF \\x1B[31m caf\xC3\xA9\nx\n^\n");
  EXPECT_EQ(RenderAt("x\n", {1, 1}, "use of @" + std::string(1000, 'b') + " here"),
            "f.commir:1:1: error: use of @" + std::string(63, 'b') +
                "... (1001 characters) here\nx\n^\n");
  // Words up to 128 characters are kept whole.
  EXPECT_EQ(RenderAt("x\n", {1, 1}, std::string(128, 'c')),
            "f.commir:1:1: error: " + std::string(128, 'c') + "\nx\n^\n");
}

// A long message of short words (a quoted string with blanks) is cut as a whole.
TEST(DiagnosticsTest, LongMessagesAreCut) {
  std::string words;
  for (int i = 0; i < 50000; ++i) words += "a b ";
  const std::string rendered = RenderAt("x\n", {1, 1}, "got \"" + words + "\"");
  EXPECT_EQ(rendered, "f.commir:1:1: error: got \"" + words.substr(0, kMaxMessageChars - 5) +
                          "... (message of 200006 characters)\nx\n^\n");
}

// Locations hold byte columns; the rendered column counts characters.
TEST(DiagnosticsTest, ColumnsCountCharacters) {
  EXPECT_EQ(RenderAt("\"\xE2\x82\xAC\xC3\xA9\" x\n", {1, 9}, "m"),
            "f.commir:1:6: error: m\n\"\xE2\x82\xAC\xC3\xA9\" x\n     ^\n");
  // Unknown locations and lines past the end still render.
  EXPECT_EQ(RenderAt("x", {0, 0}, "m"), "f.commir: error: m\n");
  EXPECT_EQ(RenderAt("x", {3, 2}, "m"), "f.commir:3:2: error: m\n\n^\n");
}

TEST(DiagnosticsTest, LineEndings) {
  const char* sources[] = {"a\nb\nc", "a\r\nb\r\nc", "a\rb\rc", "a\r\nb\rc"};
  for (const char* source : sources) {
    EXPECT_EQ(RenderAt(source, {3, 1}, "m"), "f.commir:3:1: error: m\nc\n^\n") << source;
  }
  // A byte order mark is not part of line 1.
  EXPECT_EQ(RenderAt("\xEF\xBB\xBFxy\n", {1, 2}, "m"), "f.commir:1:2: error: m\nxy\n ^\n");
}

}  // namespace
}  // namespace commir
