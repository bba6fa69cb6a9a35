// WriteOutputFile replaces a file atomically (temporary + rename) but must behave like a
// plain write for what users point it at: a symlink is written through, an existing
// file keeps its permissions, and a writable file in a directory we may not create
// files in is still written.
#include "tools/output_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace commir {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

fs::path FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(WriteOutputFile, WritesANewFile) {
  const fs::path dir = FreshDir("new");
  ASSERT_TRUE(WriteOutputFile((dir / "out.txt").string(), "hello\n").ok());
  EXPECT_EQ(ReadAll(dir / "out.txt"), "hello\n");
  // Nothing but the output is left in the directory.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(WriteOutputFile, WritesThroughASymlink) {
  const fs::path dir = FreshDir("symlink");
  fs::create_directories(dir / "elsewhere");
  std::ofstream(dir / "elsewhere" / "real.txt") << "old";
  fs::create_symlink(dir / "elsewhere" / "real.txt", dir / "link.txt");
  ASSERT_TRUE(WriteOutputFile((dir / "link.txt").string(), "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(ReadAll(dir / "elsewhere" / "real.txt"), "new");
}

TEST(WriteOutputFile, KeepsTheModeOfAnExistingFile) {
  const fs::path dir = FreshDir("mode");
  std::ofstream(dir / "out.txt") << "old";
  ASSERT_EQ(chmod((dir / "out.txt").c_str(), 0600), 0);
  ASSERT_TRUE(WriteOutputFile((dir / "out.txt").string(), "new").ok());
  struct stat info;
  ASSERT_EQ(stat((dir / "out.txt").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadAll(dir / "out.txt"), "new");
}

TEST(WriteOutputFile, WritesAWritableFileInAReadOnlyDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "root may create files in a read-only directory";
  const fs::path dir = FreshDir("readonly");
  std::ofstream(dir / "out.txt") << "old";
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  const bool ok = WriteOutputFile((dir / "out.txt").string(), "new").ok();
  chmod(dir.c_str(), 0755);
  EXPECT_TRUE(ok);
  EXPECT_EQ(ReadAll(dir / "out.txt"), "new");
}

TEST(WriteOutputFile, ReportsAMissingDirectory) {
  const fs::path dir = FreshDir("missing");
  const absl::Status status = WriteOutputFile((dir / "no" / "out.txt").string(), "x");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("cannot write"), std::string::npos);
}

// The number of entries in `dir`.
int Entries(const fs::path& dir) {
  return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// Runs `child` in a forked process and returns its wait status.
template <typename F>
int InChild(F child) {
  const pid_t pid = fork();
  if (pid == 0) {
    child();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// An interrupt between writing the temporary and renaming it: the signal still ends the
// process (as it would without the handler), and no hidden temporary is left behind.
void ExpectInterruptLeavesNothing(int signal, const std::string& name) {
  const fs::path dir = FreshDir(name);
  static int raised;
  raised = signal;
  const int status = InChild([&] {
    output_file_internal::before_rename_for_test = [] { raise(raised); };
    (void)WriteOutputFile((dir / "out.txt").string(), "partial");
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child was not ended by the signal";
  EXPECT_EQ(WTERMSIG(status), signal);
  EXPECT_EQ(Entries(dir), 0) << "a temporary was left in " << dir;
}

TEST(WriteOutputFile, SigintBeforeRenameRemovesTheTemporary) {
  ExpectInterruptLeavesNothing(SIGINT, "sigint");
}

TEST(WriteOutputFile, SigtermBeforeRenameRemovesTheTemporary) {
  ExpectInterruptLeavesNothing(SIGTERM, "sigterm");
}

// An existing output survives an interrupted replacement unchanged.
TEST(WriteOutputFile, InterruptKeepsTheOldFile) {
  const fs::path dir = FreshDir("sigterm_old");
  std::ofstream(dir / "out.txt") << "old";
  const int status = InChild([&] {
    output_file_internal::before_rename_for_test = [] { raise(SIGTERM); };
    (void)WriteOutputFile((dir / "out.txt").string(), "new");
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(Entries(dir), 1);
  EXPECT_EQ(ReadAll(dir / "out.txt"), "old");
}

// A signal the process ignores stays ignored: the write completes.
TEST(WriteOutputFile, IgnoredSignalStaysIgnored) {
  const fs::path dir = FreshDir("sigignored");
  const int status = InChild([&] {
    signal(SIGTERM, SIG_IGN);
    output_file_internal::before_rename_for_test = [] { raise(SIGTERM); };
    _exit(WriteOutputFile((dir / "out.txt").string(), "done").ok() ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(dir / "out.txt"), "done");
  EXPECT_EQ(Entries(dir), 1);
}

// The cleanup on its own, for files other than WriteOutputFile's.
TEST(TemporaryFileCleanup, RemovesACoveredFileOnSigterm) {
  const fs::path dir = FreshDir("covered");
  const std::string path = (dir / "covered.tmp").string();
  const int status = InChild([&] {
    TemporaryFileCleanup cleanup(path);
    std::ofstream(path) << "x";
    raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace commir
