#include "tools/input_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(ReadInputFile, ReadsARegularFile) {
  std::string path = TempDir() + "/input.txt";
  std::ofstream(path) << "func @f() -> () {}\n";
  absl::StatusOr<std::string> text = ReadInputFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "func @f() -> () {}\n");
}

TEST(ReadInputFile, ReadsAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "abc", 3), 3);
  close(fds[1]);
  absl::StatusOr<std::string> text = ReadAllFromFd(fds[0]);
  close(fds[0]);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "abc");
}

TEST(ReadInputFile, RefusesADirectory) {
  absl::StatusOr<std::string> text = ReadInputFile(TempDir());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("it is a directory"));
}

TEST(ReadInputFile, MissingFileNamesTheOsError) {
  absl::StatusOr<std::string> text = ReadInputFile(TempDir() + "/no-such-file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("cannot open file: No such file or directory"));
}

// A device that never ends stops at the cap instead of exhausting memory.
TEST(ReadInputFile, StopsAtTheSizeLimit) {
  absl::StatusOr<std::string> text = ReadInputFile("/dev/zero", 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(text.status().message(), HasSubstr("larger than the 1 MiB limit"));
  std::string path = TempDir() + "/exact.txt";
  std::ofstream(path) << std::string(1000, 'x');
  EXPECT_TRUE(ReadInputFile(path, 1000).ok());
  EXPECT_FALSE(ReadInputFile(path, 999).ok());
}

}  // namespace
}  // namespace commir
