// The hardware a tool's --hardware names: a built-in, or a JSON cluster file read like
// program text (tools/input_file.h): streamed, a directory refused with that reason, and
// a size cap so that /dev/zero or a FIFO that never ends fails fast.
#ifndef COMMIR_TOOLS_HARDWARE_FILE_H_
#define COMMIR_TOOLS_HARDWARE_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "sim/hardware.h"

namespace commir {

// Hardware files are a few hundred bytes.
inline constexpr size_t kMaxHardwareFileBytes = size_t{1} << 20;

// A built-in by name, else the JSON file at `name_or_path` (relative to where the user
// ran the tool). Errors name the file: a missing one lists the built-ins, a directory
// says so, JSON errors are sim::ParseHardwareJson's.
absl::StatusOr<sim::HardwareSpec> LoadHardwareArgument(const std::string& name_or_path);

}  // namespace commir

#endif  // COMMIR_TOOLS_HARDWARE_FILE_H_
