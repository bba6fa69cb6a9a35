// Reading a whole program text for commir-opt and commir-run: by streaming, so pipes,
// FIFOs and process substitutions work like files; refusing directories (which some
// systems let open(2) succeed on) with a clear message; and with a size cap, so that a
// device such as /dev/zero fails fast instead of exhausting memory.
#ifndef COMMIR_TOOLS_INPUT_FILE_H_
#define COMMIR_TOOLS_INPUT_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace commir {

// A generous limit for program text: the largest generated models are a few MiB.
inline constexpr size_t kMaxProgramBytes = size_t{1} << 30;

// Everything readable from `fd` until end of file. Errors: FailedPrecondition when `fd`
// is a directory, ResourceExhausted past `max_bytes`, otherwise the errno's code. The
// messages start with "cannot ..." or "the input ..." and name no file (callers add it).
absl::StatusOr<std::string> ReadAllFromFd(int fd, size_t max_bytes = kMaxProgramBytes);

// The whole file at `path` ("-": standard input), as ReadAllFromFd.
absl::StatusOr<std::string> ReadInputFile(const std::string& path,
                                          size_t max_bytes = kMaxProgramBytes);

}  // namespace commir

#endif  // COMMIR_TOOLS_INPUT_FILE_H_
