// commir-run on a module with calls (tools/testdata/calls.commir): a model whose layer
// is called four times runs with --func=@top on the 2-device cpu mesh (partitioned by the
// default pipeline, which inlines the calls) and passes --check against its
// single-device run, which runs the calls in the interpreter; its results are the bytes
// of the hand-copied model's; and the sim predicts it the same time and FLOPs. A spmd
// layer called in a loop body (tools/testdata/calls_spmd.commir) runs as written, calls
// in the interpreter, with the results and predictions of the loop written out.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;
using ToolResult = testing::SubprocessResult;

std::string g_binary;  // set by main()

constexpr char kProgram[] = "tools/testdata/calls.commir";
constexpr char kSpmdProgram[] = "tools/testdata/calls_spmd.commir";

ToolResult RunTool(std::vector<std::string> args) {
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(g_binary, args);
  if (!result.ok()) {
    ADD_FAILURE() << result.status();
    return {};
  }
  return *std::move(result);
}

std::string OutputDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The sim report's lines about the whole run (time, FLOPs), not the per-device table.
std::vector<std::string> SummaryLines(const std::string& report) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (absl::StartsWith(line, "predicted time") || absl::StartsWith(line, "FLOPs")) {
      lines.emplace_back(line);
    }
  }
  return lines;
}

TEST(CommirRunCalls, ModelWithCallsPassesTheCheckOnTheMesh) {
  ToolResult r = RunTool({kProgram, "--func=@top", "--check"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("%x4  f32[8, 16]"));
  EXPECT_THAT(r.out, HasSubstr("PASS"));
}

TEST(CommirRunCalls, CallsGiveTheResultsOfTheCopiedLayers) {
  std::string calls = OutputDir("calls"), copied = OutputDir("copied");
  ToolResult r = RunTool({kProgram, "--func=@top", "--output-dir=" + calls});
  ASSERT_EQ(r.exit_code, 0) << r;
  r = RunTool({kProgram, "--func=@top_copied", "--output-dir=" + copied});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::string by_calls = ReadFile(calls + "/result0.npy");
  EXPECT_FALSE(by_calls.empty());
  EXPECT_EQ(by_calls, ReadFile(copied + "/result0.npy"));
}

TEST(CommirRunCalls, SimPredictsTheCalleesOps) {
  ToolResult calls = RunTool({kProgram, "--func=@top", "--backend=sim"});
  ToolResult copied = RunTool({kProgram, "--func=@top_copied", "--backend=sim"});
  ASSERT_EQ(calls.exit_code, 0) << calls;
  ASSERT_EQ(copied.exit_code, 0) << copied;
  std::vector<std::string> summary = SummaryLines(calls.out);
  ASSERT_EQ(summary.size(), 2u) << calls.out;
  EXPECT_EQ(summary, SummaryLines(copied.out));
}

TEST(CommirRunCalls, SpmdCallsInALoopRunAsTheLoopWrittenOut) {
  std::string calls = OutputDir("spmd_calls"), inlined = OutputDir("spmd_inlined");
  ToolResult r = RunTool({kSpmdProgram, "--func=@top", "--output-dir=" + calls});
  ASSERT_EQ(r.exit_code, 0) << r;
  r = RunTool({kSpmdProgram, "--func=@top_inlined", "--output-dir=" + inlined});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::string by_calls = ReadFile(calls + "/result0.npy");
  EXPECT_FALSE(by_calls.empty());
  EXPECT_EQ(by_calls, ReadFile(inlined + "/result0.npy"));

  ToolResult sim_calls = RunTool({kSpmdProgram, "--func=@top", "--backend=sim"});
  ToolResult sim_inlined = RunTool({kSpmdProgram, "--func=@top_inlined", "--backend=sim"});
  ASSERT_EQ(sim_calls.exit_code, 0) << sim_calls;
  ASSERT_EQ(sim_inlined.exit_code, 0) << sim_inlined;
  std::vector<std::string> summary = SummaryLines(sim_calls.out);
  ASSERT_EQ(summary.size(), 2u) << sim_calls.out;
  EXPECT_EQ(summary, SummaryLines(sim_inlined.out));
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
