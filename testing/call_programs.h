// Programs whose call graph is the hard part, written out as CommIR text for tests of
// everything that follows calls (the verifier, inline, the interpreter, the tools):
//   DeepChain(n)   @main -> @f0 -> ... -> @f{n-1}, each body one call, the last a `neg`;
//   FanOut(depth)  @main -> @f0, each @fk calling @f{k+1} twice, @f{depth} a `neg`:
//                  2^depth calls of the last once expanded;
//   CallCycle(n)   @f0 -> ... -> @f{n-1} -> @f0.
// Every function is global, takes and returns one f32[4]; line numbers are predictable
// (a function is four lines, or five with two calls, then a blank line).
#ifndef COMMIR_TESTING_CALL_PROGRAMS_H_
#define COMMIR_TESTING_CALL_PROGRAMS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace commir::testing {

// The line of @fk's call in DeepChain: @main is lines 1-4 (its call on line 2), then
// @fk lines 6 + 5k to 9 + 5k. (In CallCycle, @fk's call is on line 2 + 5k.)
inline int DeepChainCallLine(int64_t k) { return static_cast<int>(7 + 5 * k); }

inline std::string CallingFunction(absl::string_view name, absl::string_view callee) {
  return absl::StrCat("func @", name, "(%x: f32[4]) -> f32[4] {\n  %y = call @", callee,
                      "(%x) : f32[4]\n  return %y\n}\n\n");
}

inline std::string LeafFunction(absl::string_view name) {
  return absl::StrCat("func @", name, "(%x: f32[4]) -> f32[4] {\n  %y = neg(%x)\n  return %y\n}\n");
}

inline std::string DeepChain(int64_t n) {
  std::string text = CallingFunction("main", "f0");
  for (int64_t i = 0; i + 1 < n; ++i) {
    absl::StrAppend(&text, CallingFunction(absl::StrCat("f", i), absl::StrCat("f", i + 1)));
  }
  absl::StrAppend(&text, LeafFunction(absl::StrCat("f", n - 1)));
  return text;
}

inline std::string FanOut(int64_t depth) {
  std::string text = CallingFunction("main", "f0");
  for (int64_t i = 0; i < depth; ++i) {
    absl::StrAppend(&text, "func @f", i, "(%x: f32[4]) -> f32[4] {\n  %a = call @f", i + 1,
                    "(%x) : f32[4]\n  %b = call @f", i + 1, "(%a) : f32[4]\n  return %b\n}\n\n");
  }
  absl::StrAppend(&text, LeafFunction(absl::StrCat("f", depth)));
  return text;
}

inline std::string CallCycle(int64_t n) {
  std::string text;
  for (int64_t i = 0; i < n; ++i) {
    absl::StrAppend(&text, CallingFunction(absl::StrCat("f", i), absl::StrCat("f", (i + 1) % n)));
  }
  return text;
}

}  // namespace commir::testing

#endif  // COMMIR_TESTING_CALL_PROGRAMS_H_
