// The parser's first pass reads only meshes; it skips each function to find where the
// next declaration starts. This does that skip on the bytes rather than on tokens: the
// first pass passes over nearly the whole file, and lexing it there (only to lex the
// function bodies again in the second pass) cost as much as the second pass's lexing.
#ifndef COMMIR_PARSER_BODY_SKIPPER_H_
#define COMMIR_PARSER_BODY_SKIPPER_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "parser/lexer.h"

namespace commir {

// Where the parser resumes after a skipped function: lexing from `resume` yields the
// next token to read, and `prev_line` is the line of the token before that one (0 if
// none).
struct SkipResult {
  Lexer::State resume;
  int32_t prev_line = 0;
};

// Walks the tokens of `source` from `from` (a lexer state between tokens; `prev_line`
// is the line of the token before it, 0 if none) exactly as the token loop it replaces
// did, stopping:
//   - before the first token that begins its line and is the identifier `mesh`,
//     `func` or `spmd` (the next declaration; a body missing its '}' ends there);
//   - after the '}' that closes the first '{' met, where every other '{' that is not
//     the last token on its line (an attribute dictionary) counts as closed at the end
//     of its line;
//   - at the end of the source.
// Only braces, strings (which may hold braces), comments and line starts matter, so it
// scans bytes without building tokens.
SkipResult SkipFunctionBody(absl::string_view source, const Lexer::State& from,
                            int32_t prev_line);

}  // namespace commir

#endif  // COMMIR_PARSER_BODY_SKIPPER_H_
