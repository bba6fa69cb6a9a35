#include "tools/command_line.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "tools/exit_codes.h"

namespace commir {

std::string ResolvePath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path == "-" || path.empty() || cwd == nullptr || std::filesystem::path(path).is_absolute()) {
    return path;
  }
  return (std::filesystem::path(cwd) / path).string();
}

int UsageError(const std::string& tool, const std::string& message) {
  std::cerr << tool << ": error: " << message << "\n"
            << "Try '" << tool << " --help' for usage.\n";
  return kExitUsage;
}

bool FlagValue(absl::string_view arg, absl::string_view name, absl::string_view& value) {
  if (!absl::ConsumePrefix(&arg, name) || !absl::ConsumePrefix(&arg, "=")) return false;
  value = arg;
  return true;
}

bool ParseIntInRange(absl::string_view text, int64_t min, int64_t max, int64_t& out) {
  return absl::SimpleAtoi(text, &out) && out >= min && out <= max;
}

}  // namespace commir
