// commir-run's memory behaviour end to end: memory follows the live values rather than
// the program's length, programs that cannot fit are refused up front with the bytes
// they need, and running out of memory mid-run is exit 3 with a message, never an
// abort (exit 134).

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string g_binary;  // set by main()

using ToolResult = testing::SubprocessResult;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string WriteProgram(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::path(TempDir()) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Runs commir-run on `program` in a child process, with its address space limited to
// `address_space_bytes` if given; reports the exit status and the child's peak RSS.
ToolResult RunTool(const std::string& program,
                   std::optional<uint64_t> address_space_bytes = std::nullopt) {
  testing::SubprocessOptions options;
  options.address_space_bytes = address_space_bytes;
  // Under ASan, freed memory sits in a quarantine (256 MB by default) that would hide
  // whether the interpreter releases values.
  options.env = {{"ASAN_OPTIONS",
                  absl::StrCat(std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "",
                               ":quarantine_size_mb=1")}};
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(g_binary, {program}, options);
  if (!result.ok()) {
    ADD_FAILURE() << "cannot run " << g_binary << ": " << result.status();
    return ToolResult{};
  }
  return *std::move(result);
}

// A function applying `length` negations in a row to an f32[256, 256] argument.
std::string ElementwiseChain(int length) {
  std::string text = "func @f(%x: f32[256, 256]) -> f32[256, 256] {\n  %v0 = neg(%x)\n";
  for (int i = 1; i < length; ++i) absl::StrAppend(&text, "  %v", i, " = neg(%v", i - 1, ")\n");
  absl::StrAppend(&text, "  return %v", length - 1, "\n}\n");
  return text;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(CommirRunMemory, PeakFollowsTheLiveValuesNotTheOpCount) {
  ToolResult short_chain = RunTool(WriteProgram("chain10.commir", ElementwiseChain(10)));
  ASSERT_EQ(short_chain.exit_code, 0) << short_chain;
  ToolResult long_chain = RunTool(WriteProgram("chain10000.commir", ElementwiseChain(10000)));
  ASSERT_EQ(long_chain.exit_code, 0) << long_chain;
  // Each op makes a 256 KB tensor: kept to the end, 10,000 of them are 2.6 GB.
  EXPECT_LT(long_chain.max_rss_kib - short_chain.max_rss_kib, 64 * 1024)
      << "10 ops: " << short_chain.max_rss_kib << " KB, 10000 ops: " << long_chain.max_rss_kib
      << " KB";
  if (!kSanitized) {
    EXPECT_LT(long_chain.max_rss_kib, 300 * 1024) << long_chain;
  }
}

// Address space for the runs below outside sanitizers (ASan reserves terabytes of
// shadow memory, so a limit would stop it from starting): enough for commir-run itself,
// and it makes a program that tries to allocate its tensors fail fast instead of
// swapping.
std::optional<uint64_t> Limit(uint64_t gib) {
  if (kSanitized) return std::nullopt;
  return gib << 30;
}

TEST(CommirRunMemory, ProgramsThatCannotFitAreRefusedUpFront) {
  // 4 TB in one tensor.
  ToolResult huge = RunTool(WriteProgram("huge.commir",
                                         "func @f() -> f32[1000000, 1000000] {\n"
                                         "  %a = full() {value = 1.0} : f32[1000000, 1000000]\n"
                                         "  return %a\n"
                                         "}\n"),
                            Limit(8));
  EXPECT_EQ(huge.exit_code, 3) << huge;
  EXPECT_THAT(huge.err, HasSubstr("huge.commir: error: @f needs at least 8000000000000 bytes"));
  EXPECT_THAT(huge.err, HasSubstr("but this machine has"));

  // A sharded matmul of 1 TB operands, partitioned over 8 devices.
  ToolResult matmul = RunTool(
      WriteProgram("matmul.commir",
                   "mesh @m(dp=8)\n"
                   "func @f(%a: f32[524288@dp, 524288], %b: f32[524288, 524288]) -> "
                   "f32[524288@dp, 524288] {\n"
                   "  %c = matmul(%a, %b) : f32[524288@dp, 524288]\n"
                   "  return %c\n"
                   "}\n"),
      Limit(8));
  EXPECT_EQ(matmul.exit_code, 3) << matmul;
  EXPECT_THAT(matmul.err, HasSubstr("needs at least"));

  // A billion devices: refused before any per-device table is made.
  ToolResult mesh = RunTool(WriteProgram("mesh.commir",
                                         "mesh @m(dp=1000000000)\n"
                                         "spmd func @f(%x: f32[4]) -> f32[4] {\n"
                                         "  %a = neg(%x)\n"
                                         "  return %a\n"
                                         "}\n"),
                            Limit(8));
  EXPECT_EQ(mesh.exit_code, 3) << mesh;
  EXPECT_THAT(mesh.err, HasSubstr("mesh.commir:1:1: error: mesh @m has 1000000000 devices; "
                                  "commir-run drives at most 16777216"));
}

TEST(CommirRunMemory, RunningOutOfMemoryMidRunExitsThree) {
  if (kSanitized) GTEST_SKIP() << "an address space limit stops ASan from starting";
  // 8 GiB of tensors at the peak: the up-front check passes on a machine with 16 GiB,
  // and a 4 GiB address space makes the allocation fail while the program runs.
  const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  if (physical < (uint64_t{16} << 30)) GTEST_SKIP() << "needs a machine with 16 GiB";
  ToolResult result = RunTool(WriteProgram("midrun.commir",
                                           "func @f() -> f32[32768, 32768] {\n"
                                           "  %a = full() {value = 1.0} : f32[32768, 32768]\n"
                                           "  %b = neg(%a)\n"
                                           "  return %b\n"
                                           "}\n"),
                              uint64_t{4} << 30);
  EXPECT_EQ(result.exit_code, 3) << result;
  EXPECT_THAT(result.err, HasSubstr("midrun.commir: error: out of memory"));
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_COMMIR_RUN\n", argv[0]);
    return 2;
  }
  commir::g_binary = argv[1];
  return RUN_ALL_TESTS();
}
