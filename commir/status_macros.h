// COMMIR_ASSIGN_OR_RETURN: the one way to unwrap an absl::StatusOr in a function that
// returns a Status (or a StatusOr): emission and lowering are long chains of fallible
// steps, and spelling `if (!x.ok()) return x.status();` after each hides the steps.
#ifndef COMMIR_COMMIR_STATUS_MACROS_H_
#define COMMIR_COMMIR_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COMMIR_STATUS_MACROS_CONCAT_INNER(a, b) a##b
#define COMMIR_STATUS_MACROS_CONCAT(a, b) COMMIR_STATUS_MACROS_CONCAT_INNER(a, b)

// `lhs = *expr`, or returns expr's status from the enclosing function when it failed.
// `lhs` may declare a variable (`Value* x`, `auto x`) or name an existing one.
#define COMMIR_ASSIGN_OR_RETURN(lhs, expr) \
  COMMIR_ASSIGN_OR_RETURN_IMPL(COMMIR_STATUS_MACROS_CONCAT(commir_status_or_, __LINE__), lhs, expr)

#define COMMIR_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

// Returns `expr` (an absl::Status) from the enclosing function when it is not OK.
#define COMMIR_RETURN_IF_ERROR(expr)                                              \
  do {                                                                            \
    if (absl::Status commir_status_ = (expr); !commir_status_.ok()) return commir_status_; \
  } while (false)

#endif  // COMMIR_COMMIR_STATUS_MACROS_H_
