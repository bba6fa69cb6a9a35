// Process exit statuses of the command-line tools (docs/commir-opt.md, docs/commir-run.md): part of the
// interface that scripts rely on.
#ifndef COMMIR_TOOLS_EXIT_CODES_H_
#define COMMIR_TOOLS_EXIT_CODES_H_

namespace commir {

enum ExitCode : int {
  kExitSuccess = 0,
  // Invalid input: parse, verify or pass failure, bad input data, a failed check.
  kExitInvalidInput = 1,
  // Bad usage: unknown flag, pass or option, malformed arguments.
  kExitUsage = 2,
  // A backend or device failure (no GPU, a communicator error).
  kExitBackendFailure = 3,
};

}  // namespace commir

#endif  // COMMIR_TOOLS_EXIT_CODES_H_
