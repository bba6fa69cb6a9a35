#include "tools/command_line.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

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

}  // namespace commir
