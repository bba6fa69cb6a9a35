// The tools on programs whose call graph is the hard part (testing/call_programs.h):
// a chain of 20,000 calls parses, verifies and inlines in commir-opt, and commir-run
// stops it at its call depth bound at the call, where each used to overflow the stack
// (exit 139); a function calling the next twice, forty deep, is refused at a call by
// `inline` and by commir-run on the cpu and the sim, where inlining used to run out of
// memory and the backends to run 2^40 ops.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/call_programs.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ToolResult = testing::SubprocessResult;

std::string g_opt, g_run, g_search;  // set by main()

// Writes `text` to a file of the test's own and returns its path.
std::string WriteProgram(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
  std::ofstream(path) << text;
  return path;
}

ToolResult RunTool(const std::string& binary, std::vector<std::string> args) {
  testing::SubprocessOptions options;
  // A regression is a failure here, not a machine out of memory or a hung test. Under
  // AddressSanitizer the tools reserve terabytes of shadow address space at start, so
  // there only the timeout guards.
#if !defined(__SANITIZE_ADDRESS__)
  options.address_space_bytes = uint64_t{4} << 30;
#endif
  options.timeout_seconds = 40;
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(binary, args, options);
  if (!result.ok()) {
    ADD_FAILURE() << result.status();
    return {};
  }
  return *std::move(result);
}

TEST(CallGraphTools, DeepChainPrintsAndInlines) {
  const std::string path = WriteProgram("chain.commir", testing::DeepChain(20000));
  ToolResult r = RunTool(g_opt, {path});
  // (The outputs are megabytes: only their beginnings are printed on a failure.)
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_TRUE(absl::StrContains(r.out, "func @f19999(%x: f32[4]) -> f32[4] {\n  %y = neg(%x)"))
      << r.out.substr(0, 2000);
  r = RunTool(g_opt, {path, "--pass-pipeline=inline"});
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  // Every function is the last one's body once inlined.
  EXPECT_TRUE(absl::StartsWith(
      r.out, "func @main(%x: f32[4]) -> f32[4] {\n  %y = neg(%x) : f32[4]\n  return %y\n}\n"))
      << r.out.substr(0, 2000);
  EXPECT_FALSE(absl::StrContains(r.out, "call")) << r.out.substr(0, 2000);
}

TEST(CallGraphTools, DeepChainRunStopsAtTheCallDepthBound) {
  const std::string path = WriteProgram("chain.commir", testing::DeepChain(20000));
  ToolResult r = RunTool(g_run, {path, "--func=@main"});
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  // @main's call is the first of the 256 that may nest; @f255's, the 257th, is refused.
  EXPECT_THAT(r.err, StartsWith(absl::StrCat(path, ":", testing::DeepChainCallLine(255),
                                             ":8: error: 'call': calls nest more than 256 "
                                             "deep")));
}

TEST(CallGraphTools, DeepChainSearchDoesNotCrash) {
  const std::string path = WriteProgram("chain.commir", testing::DeepChain(20000));
  ToolResult r = RunTool(g_search, {path, "--func=@main"});
  EXPECT_LT(r.exit_code, 128) << r.err.substr(0, 2000);
  EXPECT_FALSE(r.timed_out);
}

TEST(CallGraphTools, FanOutIsRefusedByInlineAtACall) {
  const std::string path = WriteProgram("fan_out.commir", testing::FanOut(40));
  ToolResult r = RunTool(g_opt, {path, "--pass-pipeline=inline"});
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, StartsWith(path + ":"));
  EXPECT_THAT(r.err, HasSubstr(": error: pass 'inline': inlining would copy more than 1048576 "
                               "ops"));
  EXPECT_EQ(r.out, "");
}

TEST(CallGraphTools, FanOutIsRefusedByTheCpuAndTheSim) {
  const std::string path = WriteProgram("fan_out.commir", testing::FanOut(40));
  for (const char* backend : {"--backend=cpu", "--backend=sim"}) {
    ToolResult r = RunTool(g_run, {path, "--func=@main", backend});
    EXPECT_EQ(r.exit_code, 1) << backend << "\n" << r.err.substr(0, 2000);
    EXPECT_FALSE(r.timed_out) << backend;
    // At @main's call (line 2), which runs every other op (the sim also names the
    // function it was predicting).
    EXPECT_THAT(r.err, StartsWith(absl::StrCat(path, ":2:8: error: "))) << backend;
    EXPECT_THAT(r.err, HasSubstr("'call': a run would execute more than 1048576 ops through "
                                 "calls"))
        << backend;
  }
}

// A trace needs every kernel, so the sim counts them first: once per function, not once
// per call path (2^40 of them here).
TEST(CallGraphTools, FanOutIsRefusedByTheSimWithATrace) {
  const std::string path = WriteProgram("fan_out_trace.commir", testing::FanOut(40));
  const std::string trace = path + ".trace.json";
  ToolResult r = RunTool(g_run, {path, "--func=@main", "--backend=sim", "--trace=" + trace});
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, StartsWith(path + ":"));
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s COMMIR_OPT COMMIR_RUN COMMIR_SEARCH\n", argv[0]);
    return 2;
  }
  commir::g_opt = argv[1];
  commir::g_run = argv[2];
  commir::g_search = argv[3];
  return RUN_ALL_TESTS();
}
