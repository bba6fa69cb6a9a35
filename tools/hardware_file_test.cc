// --hardware's file reading: bounded like program text, a directory named as one.
#include "tools/hardware_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(LoadHardwareArgument, Builtin) {
  absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument("h200");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "h200");
}

TEST(LoadHardwareArgument, JsonFile) {
  const std::string path = TempDir() + "/base.json";
  std::ofstream(path) << R"({"base": "h200", "name": "mine"})";
  absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument(path);
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "mine");
}

TEST(LoadHardwareArgument, MissingFileListsTheBuiltins) {
  absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument(TempDir() + "/none.json");
  ASSERT_FALSE(hw.ok());
  EXPECT_THAT(hw.status().message(), HasSubstr("no such file"));
  EXPECT_THAT(hw.status().message(), HasSubstr("h100-sxm"));
}

TEST(LoadHardwareArgument, DirectoryIsNamedAsOne) {
  absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument(TempDir());
  ASSERT_FALSE(hw.ok());
  EXPECT_THAT(hw.status().message(), HasSubstr(TempDir() + "' is a directory"));
  EXPECT_THAT(hw.status().message(), testing::Not(HasSubstr("no such file")));
}

// A device that never ends stops at the cap instead of exhausting memory.
TEST(LoadHardwareArgument, EndlessDeviceStopsAtTheCap) {
  absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument("/dev/zero");
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(hw.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(hw.status().message(), HasSubstr("/dev/zero: the input is larger than the 1 MiB"));
}

}  // namespace
}  // namespace commir
