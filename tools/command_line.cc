#include "tools/command_line.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

std::string MessageInFile(absl::string_view file, absl::string_view message) {
  // LINE ":" COL ": ", both non-empty runs of digits.
  size_t i = 0;
  bool located = false;
  for (int part = 0; part < 2; ++part) {
    const size_t start = i;
    while (i < message.size() && absl::ascii_isdigit(message[i])) ++i;
    located = i > start && i < message.size() && message[i] == ':';
    if (!located) break;
    ++i;
  }
  located = located && i < message.size() && message[i] == ' ';
  return absl::StrCat(file, located ? ":" : ": ", message);
}

bool ParseIntInRange(absl::string_view text, int64_t min, int64_t max, int64_t& out) {
  return absl::SimpleAtoi(text, &out) && out >= min && out <= max;
}

}  // namespace commir
