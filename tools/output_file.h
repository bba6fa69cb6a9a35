// Writing the tools' output files and standard output so that lost output is never
// reported as success: every write and close is checked, and a file is written to a
// temporary name in its directory and renamed into place, so that a failure (a full
// disk, a file-size limit) leaves no partial file and keeps what was there before.
// SIGINT, SIGTERM or SIGHUP between the write and the rename removes the temporary
// before the signal ends the process, so an interrupted run leaves no hidden file.
#ifndef COMMIR_TOOLS_OUTPUT_FILE_H_
#define COMMIR_TOOLS_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace commir {

// Writes `contents` to `path` as described above. A `path` that exists and is not a
// regular file (/dev/null, /dev/stdout, a FIFO) is written in place: it cannot be
// replaced, and replacing it would be wrong. Errors read
//   "cannot write 'PATH': No space left on device"
// with the errno's status code.
absl::Status WriteOutputFile(const std::string& path, std::string_view contents);

// Writes `contents` to standard output (after flushing what std::cout holds), checking
// every write: "cannot write '<stdout>': ERROR".
absl::Status WriteStandardOutput(std::string_view contents);

// Flushes standard output (the C++ and the C stream) and reports whether everything
// written to it arrived: "cannot write '<stdout>': ERROR". Call it last, before exit.
absl::Status FinishStandardOutput();

// Removes `path` if SIGINT, SIGTERM or SIGHUP ends the process while this object lives
// (the handler then re-raises the signal with its previous disposition; a signal the
// process ignores stays ignored). Keeps nothing on a normal exit: the owner renames or
// removes the file. At most a few are live at once; beyond that a path is not covered.
class TemporaryFileCleanup {
 public:
  explicit TemporaryFileCleanup(const std::string& path);
  ~TemporaryFileCleanup();
  TemporaryFileCleanup(const TemporaryFileCleanup&) = delete;
  TemporaryFileCleanup& operator=(const TemporaryFileCleanup&) = delete;

 private:
  int slot_;  // -1: not covered
};

namespace output_file_internal {
// Called by WriteOutputFile between writing the temporary and renaming it (tests only:
// a signal raised there must not leave the temporary behind).
extern void (*before_rename_for_test)();
}  // namespace output_file_internal

}  // namespace commir

#endif  // COMMIR_TOOLS_OUTPUT_FILE_H_
