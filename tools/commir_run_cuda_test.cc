// commir-run --backend=cuda end to end, on whatever this machine is:
//   - a build without CUDA, or a machine without a GPU or driver: exit 3 and a message
//     that says which (the exit-status contract: "3 a backend or device failure ... with a clear
//     message"), nothing on stdout;
//   - a machine with a GPU: the shared example checks pass against the cpu reference.
// The binary's path is the first argument; the program directories follow, the first
// holding the shared examples (mlp.commir among them).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::Not;
using ::testing::HasSubstr;

std::string g_binary;
std::vector<std::string> g_program_dirs;

// The shared example the single-program tests run.
std::string Mlp() { return g_program_dirs.front() + "/mlp.commir"; }

using ToolResult = testing::SubprocessResult;

ToolResult RunTool(const std::vector<std::string>& args) {
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(g_binary, args);
  if (!result.ok()) {
    ADD_FAILURE() << "cannot run " << g_binary << ": " << result.status();
    return ToolResult{};
  }
  return *std::move(result);
}

// Whether a failure is the backend saying clearly that it cannot run here.
bool IsClearUnavailable(const ToolResult& r) {
  return r.exit_code == 3 && r.out.empty() &&
         (absl::StrContains(r.err, "this build has no cuda backend (CUDA not found at build time)") ||
          absl::StrContains(r.err, "no CUDA-capable GPU is visible") ||
          absl::StrContains(r.err, "NVIDIA driver is missing or older"));
}

TEST(CommirRunCuda, RunsOrExitsThreeWithAClearMessage) {
  ToolResult r = RunTool({Mlp(), "--backend=cuda", "--check"});
  if (IsClearUnavailable(r)) {
    // No cuda backend or GPU here: exit 3 with the reason is the required behaviour.
    EXPECT_THAT(r.err, HasSubstr("error: "));
    std::printf("no cuda backend here; commir-run said: %s", r.err.c_str());
    return;
  }
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("PASS")) << r.out << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("FAIL"))) << r.out;
}

TEST(CommirRunCuda, EveryToolsExampleChecksOnTheGpu) {
  ToolResult probe = RunTool({Mlp(), "--backend=cuda"});
  if (IsClearUnavailable(probe)) GTEST_SKIP() << "no GPU: " << probe.err;
  int checked = 0;
  for (const std::string& dir : g_program_dirs) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string path = entry.path().string();
      if (!absl::EndsWith(path, ".commir")) continue;
      // Programs meant to fail, or spmd programs, are checked by the cpu tests; here every
      // global program that the cpu backend checks must check on the GPU too.
      ToolResult cpu = RunTool({path, "--check"});
      if (cpu.exit_code != 0) continue;
      SCOPED_TRACE(path);
      ToolResult gpu = RunTool({path, "--backend=cuda", "--check"});
      EXPECT_EQ(gpu.exit_code, 0) << gpu.out << gpu.err;
      EXPECT_THAT(gpu.out, Not(HasSubstr("FAIL")));
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(CommirRunCuda, TimeoutFlagIsValidated) {
  ToolResult r = RunTool({Mlp(), "--timeout=-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--timeout"));
  r = RunTool({Mlp(), "--timeout=0.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // the cpu backend does not wait on a device
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s COMMIR_RUN EXAMPLES_DIR [PROGRAM_DIR...]\n", argv[0]);
    return 2;
  }
  commir::g_binary = argv[1];
  commir::g_program_dirs.assign(argv + 2, argv + argc);
  return RUN_ALL_TESTS();
}
