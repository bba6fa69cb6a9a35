// Source locations carried by IR objects so that every error can name FILE:LINE:COL.
#ifndef COMMIR_COMMIR_LOCATION_H_
#define COMMIR_COMMIR_LOCATION_H_

#include <cstdint>

namespace commir {

// 1-based line and column in the module's source file; line 0 means "unknown" (IR
// built by a pass rather than parsed).
struct Location {
  int32_t line = 0;
  int32_t col = 0;

  bool known() const { return line > 0; }
  friend bool operator==(const Location& a, const Location& b) {
    return a.line == b.line && a.col == b.col;
  }
  friend bool operator<(const Location& a, const Location& b) {
    return a.line != b.line ? a.line < b.line : a.col < b.col;
  }
};

}  // namespace commir

#endif  // COMMIR_COMMIR_LOCATION_H_
