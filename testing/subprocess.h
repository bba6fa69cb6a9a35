// Running a binary in a child process from a test: arguments, standard input from a
// file, extra environment, resource limits, a timeout; the exit code, standard output
// and error and the child's peak RSS come back. The commir-run end-to-end tests share it.
#ifndef COMMIR_TESTING_SUBPROCESS_H_
#define COMMIR_TESTING_SUBPROCESS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace commir::testing {

struct SubprocessOptions {
  // The child's standard input; empty: /dev/null.
  std::string stdin_path;
  // Set in the child's environment (replacing any value it inherits).
  std::vector<std::pair<std::string, std::string>> env;
  // RLIMIT_AS for the child, when set.
  std::optional<uint64_t> address_space_bytes;
  // Runs in the child after the redirections, just before exec (to limit it further or
  // move its stdout); returning false ends the child with exit code 125.
  std::function<bool()> in_child;
  // The child is killed (SIGKILL) once it has run this long; 0: no limit.
  double timeout_seconds = 0;
};

struct SubprocessResult {
  int exit_code = -1;  // the exit status, or 128 + the signal that ended the child
  bool timed_out = false;
  std::string out;
  std::string err;
  int64_t max_rss_kib = 0;  // the child's peak resident set size
};

std::ostream& operator<<(std::ostream& os, const SubprocessResult& result);

// Runs `binary` with `args` (argv[0] is `binary`) and waits for it. An error only when the
// child cannot be started or waited for; an exec failure is exit code 127, a failed
// redirection 126.
absl::StatusOr<SubprocessResult> RunSubprocess(const std::string& binary,
                                               const std::vector<std::string>& args,
                                               const SubprocessOptions& options = {});

}  // namespace commir::testing

#endif  // COMMIR_TESTING_SUBPROCESS_H_
