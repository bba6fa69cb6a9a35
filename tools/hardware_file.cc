#include "tools/hardware_file.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/hardware_json.h"
#include "tools/command_line.h"
#include "tools/input_file.h"

namespace commir {

absl::StatusOr<sim::HardwareSpec> LoadHardwareArgument(const std::string& name_or_path) {
  if (const sim::HardwareSpec* builtin = sim::FindBuiltinHardware(name_or_path)) return *builtin;
  const std::string path = ResolvePath(name_or_path);
  struct stat info;
  if (name_or_path.empty() || stat(path.c_str(), &info) != 0) {
    std::vector<std::string> names;
    for (const sim::HardwareSpec& hw : sim::BuiltinHardware()) names.push_back(hw.name);
    return absl::NotFoundError(absl::StrFormat(
        "unknown hardware '%s': not a built-in (%s) and no such file", name_or_path,
        absl::StrJoin(names, ", ")));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is a directory, not a hardware JSON file or a built-in name", name_or_path));
  }
  absl::StatusOr<std::string> text = ReadInputFile(path, kMaxHardwareFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(name_or_path, ": ", text.status().message()));
  }
  return sim::ParseHardwareJson(*text, name_or_path);
}

}  // namespace commir
