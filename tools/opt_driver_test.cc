#include "tools/opt_driver.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/exit_codes.h"
#include "transforms/pass.h"
#include "transforms/registry/pass_registry.h"

namespace commir {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kInput[] = R"(func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0) : f32[4]
  %b = neg(%a) : f32[4]
  return %b
}
)";

// Fails without saying where.
class FailPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module&) override { return absl::UnimplementedError("cannot do that"); }
};

// Fails at the first op of the first function.
class LocatedFailPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    diagnostics().Error(module.functions()[0]->body()->front()->loc(), "unsupported op");
    return absl::UnimplementedError("cannot do that");
  }
};

// Gives the first op's result an impossible type.
class BreakPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    module.functions()[0]->body()->front()->result(0)->set_type(
        Type::Tensor(ElementType::kF32, {5}));
    return absl::OkStatus();
  }
};

// The real passes plus three that misbehave.
absl::Span<const PassInfo> TestRegistry() {
  static const auto* registry = [] {
    auto* passes = new std::vector<PassInfo>(RegisteredPasses().begin(), RegisteredPasses().end());
    passes->push_back({"fail", "fails", {}, MakePass<FailPass>});
    passes->push_back({"fail-located", "fails at an op", {}, MakePass<LocatedFailPass>});
    passes->push_back({"break", "breaks the IR", {}, MakePass<BreakPass>});
    return passes;
  }();
  return *registry;
}

struct Result {
  int status;
  std::string out;
  std::string err;
};

Result Opt(const std::vector<std::string>& args, const std::string& stdin_text = kInput,
           const std::string& working_dir = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  OptEnvironment env;
  env.registry = TestRegistry();
  env.working_dir = working_dir;
  env.in = &in;
  env.out = &out;
  env.err = &err;
  int status = RunCommirOpt(args, env);
  return {status, out.str(), err.str()};
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : ::testing::TempDir();
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// ---- Success ---------------------------------------------------------------------------

TEST(OptDriverTest, WithoutPipelinePrintsTheCanonicalForm) {
  Result r = Opt({}, "func @f(%x: f32[4]) -> f32[4] {\n  %a = neg(%x)\n      return %a }");
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.out, "func @f(%x: f32[4]) -> f32[4] {\n  %a = neg(%x) : f32[4]\n  return %a\n}\n");
  EXPECT_EQ(r.err, "");
  // Its own output reproduces itself.
  EXPECT_EQ(Opt({"-"}, r.out).out, r.out);
}

TEST(OptDriverTest, RunsThePipeline) {
  Result r = Opt({"--pass-pipeline=canonicalize,cse,dce"});
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.out, "func @f(%x: f32[4]) -> f32[4] {\n  %b = neg(%x) : f32[4]\n  return %b\n}\n");
}

TEST(OptDriverTest, AcceptsOneOrTwoDashesAndSeparateValues) {
  Result a = Opt({"-pass-pipeline", "canonicalize{fold-constants=false}", "-verify-each"});
  Result b = Opt({"--pass-pipeline=canonicalize{fold-constants=false}", "--verify-each", "-"});
  EXPECT_EQ(a.status, kExitSuccess) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(OptDriverTest, EmptyPipelineIsAllowed) {
  Result r = Opt({"--pass-pipeline="});
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.out, kInput);
}

TEST(OptDriverTest, ReadsAFileAndWritesOutputFile) {
  std::string input = WriteFile("in.commir", kInput);
  std::string output = absl::StrCat(TempDir(), "/out.commir");
  Result r = Opt({input, "-o", output, "--pass-pipeline=canonicalize"}, "");
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadFile(output),
            "func @f(%x: f32[4]) -> f32[4] {\n  %b = neg(%x) : f32[4]\n  return %b\n}\n");
}

TEST(OptDriverTest, ResolvesRelativePathsAgainstTheWorkingDirectory) {
  std::filesystem::create_directories(absl::StrCat(TempDir(), "/wd"));
  WriteFile("wd/rel.commir", kInput);
  Result r = Opt({"rel.commir", "-o=rel.out"}, "", absl::StrCat(TempDir(), "/wd"));
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(ReadFile(absl::StrCat(TempDir(), "/wd/rel.out")), kInput);
}

TEST(OptDriverTest, EmitsDot) {
  Result r = Opt({"--emit=dot"});
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_THAT(r.out, StartsWith("digraph commir {"));
  EXPECT_EQ(Opt({"--emit", "commir"}).out, kInput);
}

TEST(OptDriverTest, PrintsIrAfterEveryPassToStderr) {
  Result r = Opt({"--pass-pipeline=canonicalize,dce", "--print-ir-after-all"});
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.err, absl::StrCat("// -----// IR Dump After canonicalize //----- //\n", r.out,
                                "// -----// IR Dump After dce //----- //\n", r.out));
}

TEST(OptDriverTest, HelpAndListPasses) {
  Result help = Opt({"--help", "--bogus-but-after"});
  EXPECT_EQ(help.status, kExitUsage);  // every argument is checked first
  help = Opt({"-h"});
  EXPECT_EQ(help.status, kExitSuccess);
  EXPECT_THAT(help.out, StartsWith("usage: commir-opt [FILE|-] [--pass-pipeline=PIPE]"));
  Result list = Opt({"--list-passes"});
  EXPECT_EQ(list.status, kExitSuccess);
  EXPECT_EQ(list.out, DescribePasses(TestRegistry()));
  EXPECT_THAT(list.out, HasSubstr("    max-rewrites: int >= -1 = -1\n"));
}

// ---- Bad usage: exit 2 -------------------------------------------------------------------

TEST(OptDriverTest, UnknownFlagIsBadUsage) {
  Result r = Opt({"--frobnicate"});
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.err,
            "commir-opt: error: unknown option '--frobnicate'\n"
            "Try 'commir-opt --help' for usage.\n");
  EXPECT_EQ(r.out, "");
}

TEST(OptDriverTest, MalformedArgumentsAreBadUsage) {
  EXPECT_EQ(Opt({"--pass-pipeline"}).status, kExitUsage);
  EXPECT_EQ(Opt({"-o"}).status, kExitUsage);
  EXPECT_EQ(Opt({"-o="}).status, kExitUsage);
  EXPECT_EQ(Opt({"--emit=xml"}).status, kExitUsage);
  EXPECT_EQ(Opt({"--verify-each=yes"}).status, kExitUsage);
  Result two = Opt({"a.commir", "b.commir"});
  EXPECT_EQ(two.status, kExitUsage);
  EXPECT_THAT(two.err, HasSubstr("more than one input file ('a.commir' and 'b.commir')"));
}

TEST(OptDriverTest, UnknownPassIsBadUsageAndListsThePasses) {
  Result r = Opt({"--pass-pipeline=cse,frobnicate"});
  EXPECT_EQ(r.status, kExitUsage);
  std::string names;
  for (const PassInfo& info : TestRegistry()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", info.name);
  }
  EXPECT_EQ(r.err, absl::StrCat("commir-opt: error: unknown pass 'frobnicate'; valid passes: ",
                                names, "\n"));
}

TEST(OptDriverTest, BadOptionIsBadUsageAndListsTheOptions) {
  Result r = Opt({"--pass-pipeline=canonicalize{max-rewrites=lots}"});
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("option 'max-rewrites' expects an integer, got 'lots'"));
  EXPECT_THAT(r.err, HasSubstr("fold-constants (bool, default true)"));
  EXPECT_EQ(Opt({"--pass-pipeline=cse{x=1}"}).status, kExitUsage);
}

TEST(OptDriverTest, BadPipelineWinsOverAMissingFile) {
  EXPECT_EQ(Opt({"/no/such/file.commir", "--pass-pipeline=nope"}).status, kExitUsage);
}

// ---- Invalid input: exit 1 ---------------------------------------------------------------

TEST(OptDriverTest, MissingFileIsInvalidInput) {
  Result r = Opt({"/no/such/file.commir"});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_EQ(r.err, "/no/such/file.commir: error: cannot open file: No such file or directory\n");
}

TEST(OptDriverTest, ParseErrorsAreAllReportedWithSourceLines) {
  std::string path = WriteFile("bad.commir", R"(func @f(%x: f32[4]) -> f32[4] {
  %a = frob(%x) : f32[4]
  %b = neg(%y) : f32[4]
  return %b
}
)");
  Result r = Opt({path});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(path, ":2:8: error: ")));
  EXPECT_THAT(r.err, HasSubstr("\n  %a = frob(%x) : f32[4]\n       ^\n"));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(path, ":3:")));
}

TEST(OptDriverTest, StdinErrorsNameStdin) {
  Result r = Opt({}, "func @f(%x: f32[4]) -> f32[8] {\n  return %x\n}\n");
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_THAT(r.err, StartsWith("<stdin>:2:3: error: "));
}

TEST(OptDriverTest, PassFailureWithoutLocation) {
  Result r = Opt({"--pass-pipeline=cse,fail,dce"});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_EQ(r.err, "<stdin>: error: pass 'fail' failed: cannot do that\n");
  EXPECT_EQ(r.out, "");
}

TEST(OptDriverTest, PassFailureWithLocation) {
  Result r = Opt({"--pass-pipeline=fail-located"});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_EQ(r.err,
            "<stdin>:2:8: error: pass 'fail-located': unsupported op\n"
            "  %a = mul(%x, 1.0) : f32[4]\n"
            "       ^\n");
}

TEST(OptDriverTest, VerifyEachCatchesABrokenPass) {
  Result r = Opt({"--pass-pipeline=break,dce", "--verify-each"});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_THAT(r.err, StartsWith("<stdin>:2:8: error: invalid IR after pass 'break': result type "
                                "f32[5] does not match the inferred type f32[4]\n"));
  EXPECT_THAT(r.err, HasSubstr("<stdin>:3:8: error: invalid IR after pass 'break': "));
  // Without it the broken module is printed as it is.
  EXPECT_EQ(Opt({"--pass-pipeline=break"}).status, kExitSuccess);
}

TEST(OptDriverTest, UnwritableOutputIsAnError) {
  Result r = Opt({"-o", "/no/such/dir/out.commir"});
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_THAT(r.err, StartsWith("commir-opt: error: cannot write '/no/such/dir/out.commir'"));
}

// ---- Remarks and statistics -----------------------------------------------------------

constexpr char kMlp[] = R"(mesh @m(tp=2)
func @mlp(%x: f32[8, 16], %w1: f32[16, 32@tp], %w2: f32[32@tp, 16]) -> f32[8, 16] {
  %h = matmul(%x, %w1)
  %y = matmul(%h, %w2)
  return %y
}
)";

TEST(OptDriverTest, RemarksGoToStderrAndChangeNeitherStdoutNorTheExitStatus) {
  Result quiet = Opt({"--pass-pipeline=ring-attention", "--no-remarks"});
  Result r = Opt({"--pass-pipeline=ring-attention"});
  EXPECT_EQ(r.status, kExitSuccess);
  EXPECT_EQ(r.out, quiet.out);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(r.err,
            "<stdin>: remark: pass 'ring-attention' rewrote nothing: no attention with k/v "
            "all-gathered along the sequence in no spmd function (lower-to-spmd makes them)\n");
}

TEST(OptDriverTest, LocatedRemarksNameTheLineAndColumn) {
  Result r = Opt({"--pass-pipeline=propagate-sharding{explain=%y}"}, kMlp);
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_THAT(r.err, StartsWith("<stdin>:4:8: remark: propagate-sharding: strategy of "
                                "%y = matmul(%h, %w2) in @mlp: "));
  EXPECT_THAT(r.err, HasSubstr("\n  chosen: candidate 1 (least communication plus compute)\n"));
  EXPECT_EQ(Opt({"--pass-pipeline=propagate-sharding{explain=%y}", "--no-remarks"}, kMlp).err, "");
}

TEST(OptDriverTest, ExplainingAnUnknownValueIsInvalidInput) {
  Result r = Opt({"--pass-pipeline=propagate-sharding{explain=\"%h, %q\"}"}, kMlp);
  EXPECT_EQ(r.status, kExitInvalidInput);
  EXPECT_EQ(r.out, "");
  // The explanation of %h was not printed: the pass failed before remarking.
  EXPECT_EQ(r.err,
            "<stdin>: error: pass 'propagate-sharding' failed: explain: no value %q in a global "
            "function with a mesh\n");
}

TEST(OptDriverTest, PassStatisticsFollowThePipeline) {
  Result r = Opt({"--pass-pipeline=canonicalize,cse", "--pass-statistics"});
  EXPECT_EQ(r.status, kExitSuccess) << r.err;
  EXPECT_EQ(r.err,
            "===-------------------------------------------------------------------------===\n"
            "                         ... Pass statistics report ...\n"
            "===-------------------------------------------------------------------------===\n"
            "canonicalize\n"
            "  (rewrites) 1 : Constants folded and identities simplified\n"
            "cse\n"
            "  (rewrites) 0 : Ops merged into an equivalent op that dominates them\n");
  // Statistics of the passes that ran are printed when one fails too.
  Result failed = Opt({"--pass-pipeline=canonicalize,fail", "--pass-statistics"});
  EXPECT_EQ(failed.status, kExitInvalidInput);
  EXPECT_THAT(failed.err, HasSubstr("canonicalize\n  (rewrites) 1 : "));
  EXPECT_THAT(failed.err, HasSubstr("fail\n  (no statistics)\n"));
}

TEST(OptDriverTest, RemarkFlagsTakeNoValue) {
  EXPECT_EQ(Opt({"--no-remarks=true"}).status, kExitUsage);
  EXPECT_EQ(Opt({"--pass-statistics=1"}).status, kExitUsage);
}

}  // namespace
}  // namespace commir
