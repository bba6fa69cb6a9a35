// commir-opt's work, as a library (docs/commir-opt.md): parse, verify, run a pass pipeline
// and print the module, with the exit statuses of tools/exit_codes.h.
//
//   commir-opt [FILE|-] [--pass-pipeline=PIPE] [-o FILE] [--verify-each]
//              [--print-ir-after-all] [--pass-statistics] [--no-remarks] [--list-passes]
//              [--emit=commir|dot] [--help]
//
// Exit statuses:
//   0  success (also --help and --list-passes);
//   1  invalid input: the file cannot be read, does not parse or verify, or a pass
//      fails (including --verify-each finding invalid IR after a pass); an output
//      file that cannot be written is reported the same way;
//   2  bad usage: an unknown or malformed flag, a second input file, an unknown pass
//      or pass option, a bad option value or malformed pipeline text.
// Errors in the input go to stderr as FILE:LINE:COL: error: MESSAGE with the source
// line and a caret, every one of them; FILE is the path as given ("<stdin>" for -).
// Pass remarks (a pass that rewrote nothing says why; propagate-sharding{explain=...})
// go to stderr as FILE:LINE:COL: remark: MESSAGE, or FILE: remark: MESSAGE, as each pass
// finishes, unless --no-remarks; they change neither stdout nor the exit status.
#ifndef COMMIR_TOOLS_OPT_DRIVER_H_
#define COMMIR_TOOLS_OPT_DRIVER_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "transforms/pass.h"

namespace commir {

struct OptEnvironment {
  // Passes the pipeline may name (RegisteredPasses() in the tool).
  absl::Span<const PassInfo> registry;
  // Relative input and -o paths are resolved against this directory when it is not
  // empty (`bazel run` sets BUILD_WORKING_DIRECTORY to where the user ran it).
  std::string working_dir;
  std::istream* in = nullptr;   // the input for FILE "-" when in_fd < 0
  // When >= 0, FILE "-" is read from this descriptor instead of `in` (the tool sets 0),
  // so that a directory or an unreadable stdin is an error rather than empty input.
  int in_fd = -1;
  std::ostream* out = nullptr;  // the output without -o, --help and --list-passes
  std::ostream* err = nullptr;  // errors and --print-ir-after-all dumps
  // Leave the module allocated when done. The binary sets this because the process is
  // about to exit and freeing a large module op by op only costs time (clang's
  // -disable-free does the same); tests leave it off so leak checkers stay useful.
  bool skip_module_teardown = false;
};

// Runs commir-opt on `args` (argv without the program name); returns the exit status.
int RunCommirOpt(const std::vector<std::string>& args, const OptEnvironment& env);

}  // namespace commir

#endif  // COMMIR_TOOLS_OPT_DRIVER_H_
