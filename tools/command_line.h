// What the command-line drivers (commir-run, commir-search) share about their arguments.
#ifndef COMMIR_TOOLS_COMMAND_LINE_H_
#define COMMIR_TOOLS_COMMAND_LINE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace commir {

// `path` relative to where the user ran the command, also under `bazel run` (which runs
// the binary elsewhere and names the user's directory in BUILD_WORKING_DIRECTORY). "-"
// (standard input), empty and absolute paths are returned as they are.
std::string ResolvePath(const std::string& path);

// Prints "TOOL: error: MESSAGE" and "Try 'TOOL --help' for usage." to stderr and returns
// the bad-usage exit status. One line says what is wrong, then where the options are: the
// whole option list would bury the message.
int UsageError(const std::string& tool, const std::string& message);

// Whether `arg` is `NAME=VALUE` for this NAME (e.g. "--top"); if so sets `value` to VALUE.
bool FlagValue(absl::string_view arg, absl::string_view name, absl::string_view& value);

// `message` about the file `file`, naming it: "FILE:LINE:COL: REST" when the message
// starts with a location "LINE:COL: ", else "FILE: MESSAGE".
std::string MessageInFile(absl::string_view file, absl::string_view message);

// Parses a decimal integer in [min, max] into `out`; false (and `out` unspecified) otherwise.
bool ParseIntInRange(absl::string_view text, int64_t min, int64_t max, int64_t& out);

}  // namespace commir

#endif  // COMMIR_TOOLS_COMMAND_LINE_H_
