// CHECK for internal invariants (never for user-causable errors, which are Status
// values). Debian's Abseil 20220623 predates absl/log, so this wraps its raw logging.
#ifndef COMMIR_COMMIR_CHECK_H_
#define COMMIR_COMMIR_CHECK_H_

#include "absl/base/internal/raw_logging.h"

#define COMMIR_CHECK(condition, message) ABSL_RAW_CHECK(condition, message)

#endif  // COMMIR_COMMIR_CHECK_H_
