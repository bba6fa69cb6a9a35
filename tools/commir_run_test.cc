// Tests of the commir-run command line (docs/commir-run.md), running the real //:commir-run
// binary on the programs in tools/testdata/ and the shared examples in testdata/examples/,
// checking exit statuses, output lines, .npy files and traces.
//
// The binary's path comes as the first argument (`$(rootpath //:commir-run)` in the BUILD
// file), relative to the test's working directory, the runfiles tree.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/npy.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;
using ::testing::Not;

std::string g_binary;  // set by main()

using ToolResult = testing::SubprocessResult;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A fresh directory under the test's temporary directory.
std::string FreshDir(const std::string& name) {
  std::string dir = (std::filesystem::path(TempDir()) / name).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// commir-run's own test programs.
std::string Data(const std::string& name) { return "tools/testdata/" + name; }

// The shared examples, kept once in testdata/examples (//testdata:examples).
std::string SharedExample(const std::string& name) { return "testdata/examples/" + name; }

// Runs commir-run with `args`, optionally feeding `stdin_path` as its standard input;
// `in_child` runs in the child just before exec (to limit it, or move its stdout).
ToolResult RunToolWith(const std::vector<std::string>& args, const std::string& stdin_path,
                       void (*in_child)()) {
  testing::SubprocessOptions options;
  options.stdin_path = stdin_path;
  if (in_child != nullptr) {
    options.in_child = [in_child] {
      in_child();
      return true;
    };
  }
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(g_binary, args, options);
  if (!result.ok()) {
    ADD_FAILURE() << "cannot run " << g_binary << ": " << result.status();
    return ToolResult{};
  }
  return *std::move(result);
}

ToolResult RunTool(const std::vector<std::string>& args, const std::string& stdin_path = "") {
  return RunToolWith(args, stdin_path, nullptr);
}

// Lines of `text` containing `needle`.
std::vector<std::string> LinesWith(const std::string& text, absl::string_view needle) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) lines.emplace_back(line);
  }
  return lines;
}

int CountLines(const std::string& text) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    (void)line;
    ++n;
  }
  return n;
}

Tensor ReadNpyOrDie(const std::string& path) {
  absl::StatusOr<Tensor> t = runtime::ReadNpy(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Tensor();
}

// ---------------------------------------------------------------------------------------
// The shared examples.

TEST(CommirRun, SharedExamplesPassCheck) {
  struct Example {
    std::string file;
    int results;
  };
  for (const Example& e : std::vector<Example>{{"mlp.commir", 1},
                                                {"ag_matmul.commir", 1},
                                                {"attention.commir", 1},
                                                {"transformer_block.commir", 1}}) {
    SCOPED_TRACE(e.file);
    ToolResult r = RunTool({SharedExample(e.file), "--check"});
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(static_cast<int>(LinesWith(r.out, "PASS").size()), e.results) << r;
    EXPECT_THAT(r.out, Not(HasSubstr("FAIL"))) << r;
  }
}

TEST(CommirRun, RingAllGatherMatmulPassesAgainstGlobalReference) {
  ToolResult r = RunTool({SharedExample("ring_ag_matmul.commir"),
                          "--check-against=" + SharedExample("ag_matmul_global4.commir")});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::vector<std::string> lines = LinesWith(r.out, "PASS");
  ASSERT_EQ(lines.size(), 1u) << r;
  // "%c  f32[512, 128]  rel_l2=...  max_abs=...  PASS"
  EXPECT_THAT(lines[0], HasSubstr("%c  f32[512, 128]  rel_l2="));
  EXPECT_THAT(lines[0], HasSubstr("max_abs="));
  // `--check-against REF` (separate value) works too.
  r = RunTool({SharedExample("ring_ag_matmul.commir"), "--check-against",
               SharedExample("ag_matmul_global4.commir")});
  EXPECT_EQ(r.exit_code, 0) << r;
}

TEST(CommirRun, WrongSpmdProgramsFailTheCheck) {
  for (const char* file : {"ring_ag_matmul_wrong_shift.commir", "ring_ag_matmul_wrong_rank.commir"}) {
    SCOPED_TRACE(file);
    ToolResult r =
        RunTool({Data(file), "--check-against=" + SharedExample("ag_matmul_global4.commir")});
    EXPECT_EQ(r.exit_code, 1) << r;
    std::vector<std::string> lines = LinesWith(r.out, "FAIL");
    ASSERT_EQ(lines.size(), 1u) << r;
    EXPECT_THAT(lines[0], HasSubstr("%c  f32[512, 128]"));
    EXPECT_THAT(r.out, Not(HasSubstr("PASS")));
  }
  // A lax enough tolerance lets the same wrong result through: --rtol is honoured.
  ToolResult r =
      RunTool({Data("ring_ag_matmul_wrong_shift.commir"),
               "--check-against=" + SharedExample("ag_matmul_global4.commir"), "--rtol=10"});
  EXPECT_EQ(r.exit_code, 0) << r;
}

TEST(CommirRun, AxisGroupOrderIsChecked) {
  ToolResult r = RunTool({Data("collectives_2d.commir"),
                      "--check-against=" + Data("collectives_2d_global.commir")});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 2u) << r;
  r = RunTool({Data("collectives_2d_wrong_group.commir"),
           "--check-against=" + Data("collectives_2d_global.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(LinesWith(r.out, "FAIL").size(), 2u) << r;
}

TEST(CommirRun, PartialResultsAreSummed) {
  ToolResult r = RunTool({Data("partial.commir"),
                      "--check-against=" + Data("partial_global.commir")});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
}

// A zigzag sequence layout (device r holds chunks r and 2n-1-r): the global function is
// fed and checked chunk by chunk, a spmd function that keeps the layout passes, and one
// that hands its zigzag chunks back as contiguous blocks fails.
TEST(CommirRun, ZigzagLayoutsAreFedAndAssembled) {
  ToolResult r = RunTool({Data("zigzag_attention.commir"), "--check"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
  r = RunTool({Data("zigzag_spmd.commir"), "--check-against=" + Data("zigzag_global.commir")});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
  r = RunTool({Data("zigzag_wrong_layout.commir"), "--check-against=" + Data("zigzag_global.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(LinesWith(r.out, "FAIL").size(), 1u) << r;
}

TEST(CommirRun, InvalidProgramsExitOne) {
  ToolResult r = RunTool({SharedExample("errors_divisibility.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("errors_divisibility.commir:5:"));
  EXPECT_THAT(r.err, HasSubstr("error:"));

  r = RunTool({Data("bad_replica.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("same replica"));

  // A run-time error names the file, line and column, the device and the op.
  r = RunTool({Data("out_of_range.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("out_of_range.commir:7:8: error: device 3: 'dynamic_slice'"));
  EXPECT_THAT(r.err, HasSubstr("  %y = dynamic_slice(%x, %off)"));
  EXPECT_THAT(r.err, HasSubstr("^"));

  // So does an index past its table: gather never clamps it.
  r = RunTool({Data("gather_out_of_range.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("gather_out_of_range.commir:5:8: error: 'gather': gather: index 5 "
                               "(element 0 of the indices) is out of range for axis 0 of extent 4"));

  r = RunTool({Data("empty.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("no function"));

  r = RunTool({Data("add.commir"), "--check-against=" + Data("add_two_results.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("returns 2 results in the reference"));

  r = RunTool({Data("add.commir"), "--check-against=" + SharedExample("ring_ag_matmul.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("no function @add"));

  r = RunTool({Data("index_result.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("index_result.commir:7:3: error: result 0 of @index_result is an index"));

  r = RunTool({Data("no_such_file.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("no_such_file.commir"));
}

TEST(CommirRun, ReadsTheProgramFromStdin) {
  ToolResult r = RunTool({"-", "--check"}, SharedExample("mlp.commir"));
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
  r = RunTool({}, Data("add.commir"));
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("%z  f32[2, 3]"));
}

// ---------------------------------------------------------------------------------------
// Inputs and outputs.

TEST(CommirRun, InputsFromNpyFiles) {
  std::string dir = FreshDir("inputs");
  Tensor x = Tensor::FromDouble(ElementType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::FromDouble(ElementType::kF32, {3}, {0.5, -10, 100});
  ASSERT_TRUE(runtime::WriteNpy(dir + "/x.npy", x).ok());
  ASSERT_TRUE(runtime::WriteNpy(dir + "/y.npy", y).ok());
  std::string out = dir + "/out";
  ToolResult r = RunTool({Data("add.commir"), "--input", "x=" + dir + "/x.npy", "--input=%y=" + dir + "/y.npy",
                      "--output-dir=" + out});
  ASSERT_EQ(r.exit_code, 0) << r;
  Tensor z = ReadNpyOrDie(out + "/result0.npy");
  EXPECT_EQ(z.DebugTypeString(), "f32[2, 3]");
  EXPECT_EQ(z.ToDouble(), (std::vector<double>{1.5, -8, 103, 4.5, -5, 106}));
  EXPECT_FALSE(std::filesystem::exists(out + "/result1.npy"));

  // Only x given: y is random, x is not.
  r = RunTool({Data("add.commir"), "--input", "x=" + dir + "/x.npy", "--output-dir=" + out});
  ASSERT_EQ(r.exit_code, 0) << r;
  Tensor z2 = ReadNpyOrDie(out + "/result0.npy");
  Tensor random_y = runtime::RandomGlobalTensor(0, 1, ElementType::kF32, {3});
  for (int64_t e = 0; e < 6; ++e) {
    EXPECT_EQ(z2.ToFloat()[e], x.ToFloat()[e] + random_y.ToFloat()[e % 3]) << e;
  }
}

TEST(CommirRun, LowPrecisionInputsComeFromFloat32Files) {
  std::string dir = FreshDir("lowp");
  Tensor a = Tensor::FromDouble(ElementType::kF32, {4}, {1, 0.5, -2, 3.25});
  Tensor c = Tensor::FromDouble(ElementType::kI32, {4}, {1, -2, 3, 1000000});
  ASSERT_TRUE(runtime::WriteNpy(dir + "/a.npy", a).ok());
  ASSERT_TRUE(runtime::WriteNpy(dir + "/c.npy", c).ok());
  std::string out = dir + "/out";
  ToolResult r = RunTool({Data("lowp_args.commir"), "--input", "a=" + dir + "/a.npy", "--input",
                      "b=" + dir + "/a.npy", "--input", "c=" + dir + "/c.npy", "--output-dir", out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("f16[4]"));
  EXPECT_THAT(r.out, HasSubstr("bf16[4]"));
  // f16 and bf16 results come back as float32 files.
  Tensor a2 = ReadNpyOrDie(out + "/result0.npy");
  Tensor b2 = ReadNpyOrDie(out + "/result1.npy");
  Tensor c2 = ReadNpyOrDie(out + "/result2.npy");
  EXPECT_EQ(a2.DebugTypeString(), "f32[4]");
  EXPECT_EQ(b2.DebugTypeString(), "f32[4]");
  EXPECT_EQ(c2.DebugTypeString(), "i32[4]");
  EXPECT_EQ(a2.ToDouble(), (std::vector<double>{2, 1, -4, 6.5}));
  EXPECT_EQ(b2.ToDouble(), (std::vector<double>{2, 1, -4, 6.5}));
  EXPECT_EQ(c2.ToDouble(), (std::vector<double>{2, -4, 6, 2000000}));
}

TEST(CommirRun, BadInputsExitOne) {
  std::string dir = FreshDir("bad_inputs");
  ASSERT_TRUE(runtime::WriteNpy(dir + "/x.npy", Tensor(ElementType::kF32, {2, 3})).ok());
  ASSERT_TRUE(runtime::WriteNpy(dir + "/wrong_shape.npy", Tensor(ElementType::kF32, {3, 2})).ok());
  ASSERT_TRUE(runtime::WriteNpy(dir + "/wrong_type.npy", Tensor(ElementType::kI32, {2, 3})).ok());
  ASSERT_TRUE(runtime::WriteNpy(dir + "/f64.npy", Tensor(ElementType::kF64, {2, 3})).ok());
  WriteFile(dir + "/garbage.npy", "this is not a numpy file at all, just some text\n");
  std::string truncated = ReadFile(dir + "/x.npy");
  truncated.resize(truncated.size() - 4);
  WriteFile(dir + "/truncated.npy", truncated);

  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> fragments;
  };
  std::vector<Case> cases = {
      {{"--input", "x=" + dir + "/wrong_shape.npy"}, {"%x", "(3, 2)", "f32[2, 3]"}},
      {{"--input", "x=" + dir + "/wrong_type.npy"}, {"%x"}},
      {{"--input", "x=" + dir + "/f64.npy"}, {"%x"}},
      {{"--input", "x=" + dir + "/garbage.npy"}, {"garbage.npy"}},
      {{"--input", "x=" + dir + "/truncated.npy"}, {"truncated.npy"}},
      {{"--input", "x=" + dir + "/missing.npy"}, {"missing.npy"}},
      {{"--input", "z=" + dir + "/x.npy"}, {"no argument %z", "%x, %y"}},
      {{"--input", "x=" + dir + "/x.npy", "--input", "%x=" + dir + "/x.npy"}, {"x", "more than once"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {Data("add.commir")};
    args.insert(args.end(), c.args.begin(), c.args.end());
    ToolResult r = RunTool(args);
    SCOPED_TRACE(absl::StrCat(c.args[0], " ", c.args[1]));
    EXPECT_EQ(r.exit_code, 1) << r;
    EXPECT_THAT(r.err, HasSubstr("error"));
    for (const std::string& fragment : c.fragments) EXPECT_THAT(r.err, HasSubstr(fragment)) << r;
    EXPECT_EQ(r.out, "");
  }
}

// Programs and .npy inputs that are not regular files: a directory is refused with a
// clear message, a FIFO streams, and a device that never ends fails on its first bytes.
TEST(CommirRun, InputsThatAreNotRegularFiles) {
  std::string dir = FreshDir("not_regular");
  ToolResult r = RunTool({dir});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr(dir + ": error: cannot read file: it is a directory")) << r;
  r = RunTool({"-"}, dir);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("<stdin>: error: cannot read file: it is a directory")) << r;
  r = RunTool({Data("add.commir"), "--input", "x=" + dir});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("directory")) << r;
  // /dev/zero is all zero bytes: not the .npy magic, found without reading on.
  r = RunTool({Data("add.commir"), "--input", "x=/dev/zero"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("/dev/zero: not a .npy file")) << r;
  // A FIFO holding the program.
  std::string fifo = dir + "/program.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  pid_t writer = fork();
  if (writer == 0) {
    int fd = open(fifo.c_str(), O_WRONLY);
    std::string text = ReadFile(Data("add.commir"));
    _exit(fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 1);
  }
  r = RunTool({fifo});
  int status = 0;
  waitpid(writer, &status, 0);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("f32[2, 3]")) << r;
}

// A .npy file is read as far as its header promises: a header larger than the data that
// follows is an error, and so is data beyond what the header promises.
TEST(CommirRun, NpyDataMustMatchItsHeader) {
  std::string dir = FreshDir("npy_sizes");
  ASSERT_TRUE(runtime::WriteNpy(dir + "/x.npy", Tensor(ElementType::kF32, {2, 3})).ok());
  WriteFile(dir + "/long.npy", ReadFile(dir + "/x.npy") + "extra");
  ToolResult r = RunTool({Data("add.commir"), "--input", "x=" + dir + "/long.npy"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("long.npy")) << r;
  r = RunTool({Data("add.commir"), "--input", "x=" + dir + "/x.npy"});
  EXPECT_EQ(r.exit_code, 0) << r;
}

// Lost output is an error (exit 1, naming the file and the OS error), and a failed
// --output-dir or --trace file leaves nothing behind.
void StdoutToDevFull() {
  int full = open("/dev/full", O_WRONLY);
  if (full >= 0) dup2(full, 1);
}
void LimitFileSizeTo4KiB() {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = {4096, 4096};
  setrlimit(RLIMIT_FSIZE, &limit);
}

TEST(CommirRun, LostOutputIsAnError) {
  ToolResult r = RunToolWith({Data("add.commir")}, "", StdoutToDevFull);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("cannot write '<stdout>': No space left on device")) << r;
  r = RunToolWith({"--help"}, "", StdoutToDevFull);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("cannot write '<stdout>': No space left on device")) << r;

  r = RunTool({SharedExample("mlp.commir"), "--trace=/dev/full"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("cannot write '/dev/full': No space left on device")) << r;

  // mlp's result is 128 KiB: far over the limit.
  std::string dir = FreshDir("limited");
  r = RunToolWith({SharedExample("mlp.commir"), "--output-dir=" + dir + "/out"}, "",
                  LimitFileSizeTo4KiB);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("result0.npy': File too large")) << r;
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/out")) << "a failed --output-dir left files";

  std::string trace_dir = FreshDir("limited_trace");
  r = RunToolWith(
      {SharedExample("transformer_block.commir"), "--trace=" + trace_dir + "/trace.json"}, "",
      LimitFileSizeTo4KiB);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("trace.json': File too large")) << r;
  EXPECT_TRUE(std::filesystem::is_empty(trace_dir)) << "a failed --trace left files";
}

// Parses "NAME  TYPE  min=A  max=B  mean=C" summary lines.
std::map<std::string, double> ParseSummary(const std::string& line) {
  std::map<std::string, double> values;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    double v = 0;
    if (!kv.second.empty() && absl::SimpleAtod(kv.second, &v)) values[kv.first] = v;
  }
  return values;
}

TEST(CommirRun, OutputDirMatchesThePrintedSummary) {
  std::string out = FreshDir("outdir") + "/nested/dir";
  ToolResult r = RunTool({Data("same_tp4.commir"), "--output-dir=" + out, "--seed=7"});
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_EQ(CountLines(r.out), 2) << r;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  EXPECT_THAT(lines[0], ::testing::StartsWith("%y  f32[8, 6]  min="));
  EXPECT_THAT(lines[1], ::testing::StartsWith("%x  f32[8, 4]  min="));
  for (int i = 0; i < 2; ++i) {
    Tensor t = ReadNpyOrDie(absl::StrCat(out, "/result", i, ".npy"));
    std::vector<double> v = t.ToDouble();
    ASSERT_FALSE(v.empty());
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    std::map<std::string, double> printed = ParseSummary(lines[i]);
    ASSERT_EQ(printed.size(), 3u) << lines[i];
    EXPECT_NEAR(printed["min"], lo, 1e-5 * std::abs(lo) + 1e-12) << lines[i];
    EXPECT_NEAR(printed["max"], hi, 1e-5 * std::abs(hi) + 1e-12) << lines[i];
    EXPECT_NEAR(printed["mean"], sum / v.size(), 1e-5 * std::abs(sum / v.size()) + 1e-9) << lines[i];
  }
  // The second result is the argument itself: the random input for seed 7.
  Tensor x = ReadNpyOrDie(out + "/result1.npy");
  EXPECT_TRUE(x.BitwiseEqual(runtime::RandomGlobalTensor(7, 0, ElementType::kF32, {8, 4})));
}

TEST(CommirRun, SeedChangesInputsAndReproduces) {
  std::string base = FreshDir("seeds");
  auto run = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {SharedExample("mlp.commir"),
                                     "--output-dir=" + base + "/" + name};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolResult r = RunTool(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    return ReadNpyOrDie(base + "/" + name + "/result0.npy");
  };
  Tensor a = run("a", {"--seed=1"});
  Tensor b = run("b", {"--seed", "1"});
  Tensor c = run("c", {"--seed=2"});
  Tensor d = run("d", {});
  Tensor e = run("e", {"--seed=0"});
  EXPECT_TRUE(a.BitwiseEqual(b));
  EXPECT_FALSE(a.BitwiseEqual(c));
  EXPECT_FALSE(a.BitwiseEqual(d));
  EXPECT_TRUE(d.BitwiseEqual(e));
  EXPECT_EQ(a.DebugTypeString(), "f32[256, 128]");
}

TEST(CommirRun, InputsDoNotDependOnTheDeviceCount) {
  std::string base = FreshDir("devices");
  std::vector<std::vector<Tensor>> results;
  for (const char* file : {"same_global.commir", "same_tp2.commir", "same_tp4.commir"}) {
    std::string out = base + "/" + file;
    ToolResult r = RunTool({Data(file), "--seed=3", "--output-dir=" + out});
    ASSERT_EQ(r.exit_code, 0) << r;
    // --init=scaled draws from the same global values, whatever the device count.
    ToolResult scaled =
        RunTool({Data(file), "--seed=3", "--init=scaled", "--output-dir=" + out + "_scaled"});
    ASSERT_EQ(scaled.exit_code, 0) << scaled;
    EXPECT_TRUE(ReadNpyOrDie(out + "_scaled/result0.npy")
                    .BitwiseEqual(ReadNpyOrDie(base + "/same_global.commir_scaled/result0.npy")))
        << file;
    ASSERT_EQ(r.exit_code, 0) << r;
    results.push_back({ReadNpyOrDie(out + "/result0.npy"), ReadNpyOrDie(out + "/result1.npy")});
  }
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_TRUE(results[i][1].BitwiseEqual(results[0][1])) << "inputs differ, program " << i;
    EXPECT_TRUE(results[i][0].BitwiseEqual(results[0][0])) << "results differ, program " << i;
  }
  // And the spmd programs check against the global one.
  for (const char* file : {"same_tp2.commir", "same_tp4.commir"}) {
    ToolResult r = RunTool({Data(file), "--seed=3", "--check-against=" + Data("same_global.commir")});
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(LinesWith(r.out, "PASS").size(), 2u) << r;
  }
}

// --init=scaled: a matmul's contracted operand [K, N] is uniform scaled to variance 1/K,
// norm weights are 1 and biases 0, everything else uniform [-1, 1) as by default.
TEST(CommirRun, ScaledInitFollowsEachArgumentsRole) {
  std::string out = FreshDir("init_roles");
  ToolResult r = RunTool({Data("init_roles.commir"), "--init=scaled", "--seed=5",
                          "--output-dir=" + out});
  ASSERT_EQ(r.exit_code, 0) << r;
  Tensor x = ReadNpyOrDie(out + "/result1.npy");
  EXPECT_TRUE(x.BitwiseEqual(runtime::RandomGlobalTensor(5, 0, ElementType::kF32, {8, 16})));
  Tensor w = ReadNpyOrDie(out + "/result2.npy");
  const double bound = std::sqrt(3.0 / 16);  // uniform (-a, a) has variance a^2 / 3 = 1/16
  std::vector<double> wv = w.ToDouble();
  ASSERT_EQ(wv.size(), 16u * 32u);
  double sum_sq = 0;
  for (size_t e = 0; e < wv.size(); ++e) {
    EXPECT_EQ(wv[e], static_cast<float>(runtime::RandomUniformValue(5, 1, e) * bound)) << e;
    sum_sq += wv[e] * wv[e];
  }
  EXPECT_NEAR(sum_sq / wv.size(), 1.0 / 16, 0.2 / 16);
  EXPECT_EQ(ReadNpyOrDie(out + "/result3.npy").ToDouble(), std::vector<double>(32, 0.0));
  EXPECT_EQ(ReadNpyOrDie(out + "/result4.npy").ToDouble(), std::vector<double>(32, 1.0));
  EXPECT_EQ(ReadNpyOrDie(out + "/result5.npy").ToDouble(), std::vector<double>(32, 0.0));
  // The default is the spec's uniform [-1, 1) for every argument.
  std::string plain = FreshDir("init_uniform");
  r = RunTool({Data("init_roles.commir"), "--seed=5", "--output-dir=" + plain});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(ReadNpyOrDie(plain + "/result2.npy")
                  .BitwiseEqual(runtime::RandomGlobalTensor(5, 1, ElementType::kF32, {16, 32})));
  r = RunTool({Data("init_roles.commir"), "--init=uniform", "--seed=5", "--output-dir=" + out});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(ReadNpyOrDie(out + "/result2.npy").BitwiseEqual(ReadNpyOrDie(plain + "/result2.npy")));
}

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (double v : t.ToDouble()) m = std::max(m, std::abs(v));
  return m;
}

TEST(CommirRun, DeepChainStaysInRangeWithScaledInit) {
  std::string base = FreshDir("deep");
  ToolResult r = RunTool({Data("deep_mlp.commir"), "--init=scaled", "--output-dir=" + base + "/s"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_LT(MaxAbs(ReadNpyOrDie(base + "/s/result0.npy")), 10.0);
  r = RunTool({Data("deep_mlp.commir"), "--output-dir=" + base + "/u"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_GT(MaxAbs(ReadNpyOrDie(base + "/u/result0.npy")), 1e5);
}

TEST(CommirRun, UnknownInitListsTheValidOnes) {
  ToolResult r = RunTool({SharedExample("mlp.commir"), "--init=gaussian"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--init must be one of uniform, scaled; got 'gaussian'")) << r;
}

// ---------------------------------------------------------------------------------------
// Function selection and usage.

TEST(CommirRun, FunctionSelection) {
  std::string dir = FreshDir("func");
  ASSERT_TRUE(runtime::WriteNpy(dir + "/x.npy",
                                Tensor::FromDouble(ElementType::kF32, {4}, {1, 2, 3, 4}))
                  .ok());
  struct Case {
    std::string func;
    std::vector<double> want;
  };
  for (const Case& c : std::vector<Case>{{"--func=@twice", {2, 4, 6, 8}},
                                         {"--func=negate", {-1, -2, -3, -4}},
                                         {"--func=@swap", {3, 4, 1, 2}}}) {
    SCOPED_TRACE(c.func);
    std::string out = dir + "/" + c.func.substr(7);
    ToolResult r = RunTool({Data("multi.commir"), c.func, "--input", "x=" + dir + "/x.npy",
                        "--output-dir=" + out});
    ASSERT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(ReadNpyOrDie(out + "/result0.npy").ToDouble(), c.want);
  }
  ToolResult r = RunTool({Data("multi.commir"), "--func", "@nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("no function @nope"));
  EXPECT_THAT(r.err, HasSubstr("@twice"));
  // Several functions and no --func: the user must choose.
  r = RunTool({Data("multi.commir")});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--func"));
}

TEST(CommirRun, UsageErrorsExitTwo) {
  std::vector<std::vector<std::string>> cases = {
      {SharedExample("mlp.commir"), "--frobnicate"},
      {SharedExample("mlp.commir"), "--seed=abc"},
      {SharedExample("mlp.commir"), "--seed=-1"},
      {SharedExample("mlp.commir"), "--seed="},
      {SharedExample("mlp.commir"), SharedExample("ag_matmul.commir")},
      {SharedExample("mlp.commir"), "--bench=many"},
      {SharedExample("mlp.commir"), "--rtol=-1"},
      {SharedExample("mlp.commir"), "--input", "x"},
      {SharedExample("mlp.commir"), "--func"},
      {SharedExample("mlp.commir"), "--check=yes"},
      {SharedExample("ring_ag_matmul.commir"), "--check"},
      {SharedExample("mlp.commir"), "--backend=tpu"},
      {SharedExample("mlp.commir"), "--rtol=nan"},
      {SharedExample("mlp.commir"), "--rtol=1e400"},
      {SharedExample("mlp.commir"), "--rtol=inf"},
      {SharedExample("mlp.commir"), "--output-dir="},
      {SharedExample("mlp.commir"), "--trace="},
      {SharedExample("mlp.commir"), "--check", "--check-against=" + SharedExample("mlp.commir")},
      {Data("add.commir"), "--input", "x="},
      {SharedExample("mlp.commir"), "--init=gaussian"},
      {SharedExample("mlp.commir"), "--p2p=nvlink"},
      {SharedExample("mlp.commir"), "--p2p="},
      {SharedExample("mlp.commir"), "--nccl-ctas=0"},
      {SharedExample("mlp.commir"), "--nccl-ctas=65"},
      {SharedExample("mlp.commir"), "--nccl-ctas=8:4"},
      {SharedExample("mlp.commir"), "--nccl-ctas=4:"},
      {SharedExample("mlp.commir"), "--nccl-ctas=x"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    ToolResult r = RunTool(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_THAT(r.err, HasSubstr("error")) << r;
    // The message, not buried under the whole option list.
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r;
    EXPECT_EQ(r.out, "");
  }
  ToolResult help = RunTool({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: commir-run"));
}

// The cuda backend's transport flags parse on any machine (the cpu backend ignores them).
TEST(CommirRun, TransportFlagsAreAccepted) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--p2p=ce", "--nccl-ctas=4"},
        std::vector<std::string>{"--p2p=nccl", "--nccl-ctas=2:64"}}) {
    std::vector<std::string> args = {SharedExample("mlp.commir")};
    args.insert(args.end(), flags.begin(), flags.end());
    ToolResult r = RunTool(args);
    EXPECT_EQ(r.exit_code, 0) << r;
  }
}

// --backend=cuda depends on the build and the machine: commir_run_cuda_test.cc.
TEST(CommirRun, UnknownBackendsAreUsageErrors) {
  ToolResult r = RunTool({SharedExample("mlp.commir"), "--backend=tpu"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("unknown or unavailable backend 'tpu'"));
  EXPECT_THAT(r.err, HasSubstr("sim"));  // the list of what is available
  r = RunTool({SharedExample("mlp.commir"), "--backend=cpu"});
  EXPECT_EQ(r.exit_code, 0) << r;
}

// ---------------------------------------------------------------------------------------
// Non-finite results, bench and trace.

TEST(CommirRun, NonFiniteResults) {
  ToolResult r = RunTool({Data("nonfinite.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("non-finite"));
  EXPECT_THAT(r.err, HasSubstr("NaN"));
  EXPECT_THAT(r.err, HasSubstr("--allow-nonfinite"));
  r = RunTool({Data("nonfinite.commir"), "--allow-nonfinite"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("%y  f32[16]  min="));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("nonfinite=[1-9]"));
  EXPECT_THAT(r.out, Not(HasSubstr("nan")));
  // One rule with and without --check: non-finite results need --allow-nonfinite (a
  // reference computing the same NaNs vouches for nothing); given it, --check compares
  // them with the reference's, position by position.
  r = RunTool({Data("nonfinite.commir"), "--check"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("non-finite"));
  EXPECT_THAT(r.err, HasSubstr("--allow-nonfinite"));
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 0u) << r;
  r = RunTool({Data("nonfinite.commir"), "--check", "--allow-nonfinite"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
}

// A NaN in an input gets the same verdict with and without --check.
TEST(CommirRun, NanInputSameVerdictWithAndWithoutCheck) {
  std::string dir = FreshDir("nan_input");
  std::vector<double> values(6, 0.5);
  values[4] = std::nan("");
  ASSERT_TRUE(
      runtime::WriteNpy(dir + "/x.npy", Tensor::FromDouble(ElementType::kF32, {2, 3}, values)).ok());
  const std::string input = "x=" + dir + "/x.npy";
  for (bool check : {false, true}) {
    SCOPED_TRACE(check ? "--check" : "no --check");
    std::vector<std::string> args = {Data("add.commir"), "--input", input};
    if (check) args.push_back("--check");
    ToolResult r = RunTool(args);
    EXPECT_EQ(r.exit_code, 1) << r;
    EXPECT_THAT(r.err, HasSubstr("%z: 1 non-finite value (1 NaN, 0 infinite)")) << r;
    args.push_back("--allow-nonfinite");
    r = RunTool(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    if (check) {
      EXPECT_EQ(LinesWith(r.out, "PASS").size(), 1u) << r;
    }
  }
}

TEST(CommirRun, BenchPrintsMinAndMedian) {
  ToolResult r = RunTool({SharedExample("ring_ag_matmul.commir"), "--bench=3"});
  ASSERT_EQ(r.exit_code, 0) << r;
  std::vector<std::string> lines = LinesWith(r.out, "bench:");
  ASSERT_EQ(lines.size(), 1u) << r;
  EXPECT_THAT(lines[0], HasSubstr("3 runs"));
  EXPECT_THAT(lines[0], ::testing::ContainsRegex("min [0-9.]+ ms"));
  EXPECT_THAT(lines[0], ::testing::ContainsRegex("median [0-9.]+ ms"));
  // The result is still reported.
  EXPECT_THAT(r.out, HasSubstr("%c  f32[512, 128]"));
}

// A minimal JSON reader: enough to check that a trace is well-formed and to look at it.
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>,
               std::map<std::string, Json>>
      v;
  bool is_object() const { return v.index() == 5; }
  bool is_array() const { return v.index() == 4; }
  const std::map<std::string, Json>& object() const { return std::get<5>(v); }
  const std::vector<Json>& array() const { return std::get<4>(v); }
  const std::string* string() const { return std::get_if<3>(&v); }
  const double* number() const { return std::get_if<2>(&v); }
  const Json* Get(const std::string& key) const {
    if (!is_object()) return nullptr;
    auto it = object().find(key);
    return it == object().end() ? nullptr : &it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(absl::string_view text) : text_(text) {}
  bool ParseDocument(Json& out) {
    if (!ParseValue(out)) return false;
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ParseString(std::string& out) {
    if (!Consume('"')) return false;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        char e = text_[pos_++];
        if (e == 'u') {
          if (pos_ + 4 > text_.size()) return false;
          pos_ += 4;
          out.push_back('?');
          continue;
        }
        if (std::string("\"\\/bfnrt").find(e) == std::string::npos) return false;
        out.push_back(e);
        continue;
      }
      out.push_back(c);
    }
    return Consume('"');
  }
  bool ParseValue(Json& out) {
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      std::map<std::string, Json> object;
      if (!Consume('}')) {
        do {
          std::string key;
          Json value;
          if (!ParseString(key) || !Consume(':') || !ParseValue(value)) return false;
          object[key] = std::move(value);
        } while (Consume(','));
        if (!Consume('}')) return false;
      }
      out.v = std::move(object);
      return true;
    }
    if (c == '[') {
      ++pos_;
      std::vector<Json> array;
      if (!Consume(']')) {
        do {
          Json value;
          if (!ParseValue(value)) return false;
          array.push_back(std::move(value));
        } while (Consume(','));
        if (!Consume(']')) return false;
      }
      out.v = std::move(array);
      return true;
    }
    if (c == '"') {
      std::string s;
      if (!ParseString(s)) return false;
      out.v = std::move(s);
      return true;
    }
    for (auto [word, value] : {std::pair<const char*, int>{"true", 1}, {"false", 0}, {"null", 2}}) {
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        if (value == 2) out.v = nullptr;
        else out.v = value == 1;
        return true;
      }
    }
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '.' || text_[pos_] == 'e' ||
                                   text_[pos_] == 'E' || text_[pos_] == '+' || text_[pos_] == '-')) {
      ++pos_;
    }
    double d = 0;
    if (pos_ == start || !absl::SimpleAtod(text_.substr(start, pos_ - start), &d)) return false;
    out.v = d;
    return true;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

TEST(CommirRun, JsonReaderRejectsBrokenJson) {
  Json j;
  EXPECT_TRUE(JsonReader(R"({"a": [1, 2.5e3, "x\"y", true, null, {}]})").ParseDocument(j));
  EXPECT_FALSE(JsonReader(R"({"a": [1, 2,]})").ParseDocument(j));
  EXPECT_FALSE(JsonReader(R"({"a": 1} x)").ParseDocument(j));
  EXPECT_FALSE(JsonReader(R"({"a": 1)").ParseDocument(j));
}

TEST(CommirRun, TraceIsJsonWithEventsPerDevice) {
  std::string path = FreshDir("trace") + "/ring.json";
  ToolResult r = RunTool({SharedExample("ring_ag_matmul.commir"), "--trace=" + path});
  ASSERT_EQ(r.exit_code, 0) << r;
  Json trace;
  ASSERT_TRUE(JsonReader(ReadFile(path)).ParseDocument(trace)) << ReadFile(path);
  const Json* events = trace.Get("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_TRUE(events->is_array());
  std::map<int, int> complete_per_device;
  std::map<int, std::map<std::string, int>> names_per_device;
  std::map<int, std::string> process_names;
  for (const Json& e : events->array()) {
    ASSERT_TRUE(e.is_object());
    const Json* ph = e.Get("ph");
    const Json* pid = e.Get("pid");
    ASSERT_NE(ph, nullptr);
    ASSERT_NE(pid, nullptr);
    ASSERT_NE(pid->number(), nullptr);
    int device = static_cast<int>(*pid->number());
    if (*ph->string() == "M") {
      process_names[device] = *e.Get("args")->Get("name")->string();
      continue;
    }
    ASSERT_EQ(*ph->string(), "X");
    ASSERT_NE(e.Get("ts"), nullptr);
    ASSERT_NE(e.Get("dur"), nullptr);
    EXPECT_GE(*e.Get("dur")->number(), 0);
    EXPECT_GE(*e.Get("ts")->number(), 0);
    ++complete_per_device[device];
    ++names_per_device[device][*e.Get("name")->string()];
    if (*e.Get("name")->string() == "shift") {
      EXPECT_EQ(*e.Get("tid")->number(), 1) << "the shift runs on stream 1";
      EXPECT_EQ(*e.Get("cat")->string(), "comm");
    }
  }
  ASSERT_EQ(complete_per_device.size(), 4u);
  ASSERT_EQ(process_names.size(), 4u);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(process_names[d], absl::StrCat("device ", d));
    // rank and full, then 4 trips of 6 ops (yield and return are not ops that run).
    EXPECT_EQ(complete_per_device[d], 2 + 4 * 6) << d;
    EXPECT_EQ(names_per_device[d]["shift"], 4);
    EXPECT_EQ(names_per_device[d]["matmul"], 4);
    EXPECT_EQ(names_per_device[d]["dynamic_update_slice"], 4);
  }
}

TEST(CommirRun, TraceShowsEachOpOnItsStream) {
  ToolResult r = RunTool({Data("streams.commir"), "--check-against=" + Data("streams_global.commir")});
  EXPECT_EQ(r.exit_code, 0) << r;
  std::string path = FreshDir("trace_streams") + "/streams.json";
  r = RunTool({Data("streams.commir"), "--trace", path});
  ASSERT_EQ(r.exit_code, 0) << r;
  Json trace;
  ASSERT_TRUE(JsonReader(ReadFile(path)).ParseDocument(trace)) << ReadFile(path);
  // (device, op name) -> the streams of its events, in order.
  std::map<std::pair<int, std::string>, std::vector<int>> streams;
  int complete = 0;
  for (const Json& e : trace.Get("traceEvents")->array()) {
    if (*e.Get("ph")->string() != "X") continue;
    ++complete;
    int device = static_cast<int>(*e.Get("pid")->number());
    streams[{device, *e.Get("name")->string()}].push_back(static_cast<int>(*e.Get("tid")->number()));
  }
  // full, then 2 trips of 9 ops, on 4 devices.
  EXPECT_EQ(complete, 4 * (1 + 2 * 9));
  for (int d = 0; d < 4; ++d) {
    SCOPED_TRACE(absl::StrCat("device ", d));
    auto of = [&](const char* name) { return streams[{d, name}]; };
    EXPECT_EQ(of("matmul"), (std::vector<int>{0, 1}));
    EXPECT_EQ(of("all_gather"), (std::vector<int>{0, 1}));
    EXPECT_EQ(of("dynamic_update_slice"), (std::vector<int>{0, 1}));
    EXPECT_EQ(of("dynamic_slice"), (std::vector<int>{0, 2, 1, 2}));
    EXPECT_EQ(of("mul"), (std::vector<int>{1, 0, 1, 0}));
    EXPECT_EQ(of("full"), (std::vector<int>{0}));
  }
}

// ---------------------------------------------------------------------------------------
// Low precision.

TEST(CommirRun, Bf16AndF16ProgramsCheckWithDefaultTolerances) {
  for (const char* func : {"@mm_bf16", "@mm_f16"}) {
    SCOPED_TRACE(func);
    ToolResult r = RunTool({Data("lowp_spmd.commir"), absl::StrCat("--func=", func),
                        "--check-against=" + Data("lowp_global.commir")});
    EXPECT_EQ(r.exit_code, 0) << r;
    std::vector<std::string> lines = LinesWith(r.out, "PASS");
    ASSERT_EQ(lines.size(), 1u) << r;
    EXPECT_THAT(lines[0], HasSubstr(func[4] == 'b' ? "bf16[64, 16]" : "f16[64, 16]"));
    // The global programs run and check too.
    r = RunTool({Data("lowp_global.commir"), absl::StrCat("--func=", func), "--check"});
    EXPECT_EQ(r.exit_code, 0) << r;
  }
  ToolResult r = RunTool({Data("lowp_spmd.commir"), "--func=@mm_bf16_wrong",
                      "--check-against=" + Data("lowp_global.commir")});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(LinesWith(r.out, "FAIL").size(), 1u) << r;
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
