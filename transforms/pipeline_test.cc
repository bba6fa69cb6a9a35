#include "transforms/pipeline.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/canonicalize.h"
#include "transforms/option_schema.h"
#include "transforms/registry/pass_registry.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

// A pass without options that does nothing.
class NopPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module&) override { return absl::OkStatus(); }
};

// Options of every type, declared as a real pass declares them.
struct AlphaOptions {
  enum class Mode { kFast, kSlow };
  int64_t count = 3;
  bool flag = false;
  std::string label;
  Mode mode = Mode::kFast;

  static const OptionSchema<AlphaOptions>& Schema() {
    static const auto* schema = &(*new OptionSchema<AlphaOptions>())
                                     .Int("count", &AlphaOptions::count, "an int")
                                     .Bool("flag", &AlphaOptions::flag, "a bool")
                                     .String("label", &AlphaOptions::label, "a string")
                                     .Enum("mode", &AlphaOptions::mode,
                                           {{"fast", Mode::kFast}, {"slow", Mode::kSlow}},
                                           "an enum");
    return *schema;
  }
};

// A pass that does nothing; tests read its typed options back.
class AlphaPass : public OptionsPass<AlphaOptions> {
 public:
  static const PassInfo& Info() {
    static const PassInfo* info =
        new PassInfo(MakePassInfo<AlphaPass>("alpha", "Every kind of option"));
    return *info;
  }
  explicit AlphaPass(AlphaOptions options = {}) : OptionsPass(Info(), std::move(options)) {}
  absl::Status Run(Module&) override { return absl::OkStatus(); }
};

// A registry with every option type.
const std::vector<PassInfo>& TestRegistry() {
  static const auto* registry = new std::vector<PassInfo>{
      AlphaPass::Info(),
      {"beta", "No options", {}, MakePass<NopPass>},
  };
  return *registry;
}

std::vector<std::unique_ptr<Pass>> Parse(absl::string_view text) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(text, TestRegistry());
  EXPECT_TRUE(passes.ok()) << passes.status();
  if (!passes.ok()) return {};
  return *std::move(passes);
}

absl::Status ParseError(absl::string_view text) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(text, TestRegistry());
  EXPECT_FALSE(passes.ok()) << "'" << text << "' parsed";
  return passes.status();
}

std::vector<std::string> Names(const std::vector<std::unique_ptr<Pass>>& passes) {
  std::vector<std::string> names;
  for (const auto& pass : passes) names.push_back(pass->name());
  return names;
}

// The typed options of a parsed alpha pass.
const AlphaOptions& Alpha(const std::unique_ptr<Pass>& pass) {
  return static_cast<const AlphaPass&>(*pass).options();
}

TEST(PipelineTest, EmptyPipelineHasNoPasses) {
  EXPECT_TRUE(Parse("").empty());
  EXPECT_TRUE(Parse("  \t ").empty());
}

TEST(PipelineTest, PassesInOrderWithDefaults) {
  std::vector<std::unique_ptr<Pass>> passes = Parse("beta,alpha,beta");
  EXPECT_THAT(Names(passes), ::testing::ElementsAre("beta", "alpha", "beta"));
  const AlphaOptions& options = Alpha(passes[1]);
  EXPECT_EQ(options.count, 3);
  EXPECT_FALSE(options.flag);
  EXPECT_EQ(options.label, "");
  EXPECT_EQ(options.mode, AlphaOptions::Mode::kFast);
  EXPECT_EQ(passes[1]->description(), "Every kind of option");
}

TEST(PipelineTest, ParsesEveryOptionType) {
  std::vector<std::unique_ptr<Pass>> passes =
      Parse(R"(alpha{count=-12,flag=true,label=hello world,mode=slow})");
  ASSERT_EQ(passes.size(), 1u);
  const AlphaOptions& options = Alpha(passes[0]);
  EXPECT_EQ(options.count, -12);
  EXPECT_TRUE(options.flag);
  EXPECT_EQ(options.label, "hello world");
  EXPECT_EQ(options.mode, AlphaOptions::Mode::kSlow);
}

TEST(PipelineTest, ToleratesWhitespaceEverywhere) {
  std::vector<std::unique_ptr<Pass>> passes =
      Parse(" beta ,\n alpha { count = 7 , flag , label = \"a, b}\" } , beta ");
  EXPECT_THAT(Names(passes), ::testing::ElementsAre("beta", "alpha", "beta"));
  EXPECT_EQ(Alpha(passes[1]).count, 7);
  EXPECT_TRUE(Alpha(passes[1]).flag);
  EXPECT_EQ(Alpha(passes[1]).label, "a, b}");
}

TEST(PipelineTest, EmptyBracesKeepDefaults) {
  std::vector<std::unique_ptr<Pass>> passes = Parse("alpha{}");
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_EQ(Alpha(passes[0]).count, 3);
}

TEST(PipelineTest, BoolsAcceptOneAndZero) {
  EXPECT_TRUE(Alpha(Parse("alpha{flag=1}")[0]).flag);
  EXPECT_FALSE(Alpha(Parse("alpha{flag=0}")[0]).flag);
}

TEST(PipelineTest, UnknownPassListsEveryPass) {
  absl::Status status = ParseError("beta,gamma");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown pass 'gamma'; valid passes: alpha, beta");
}

TEST(PipelineTest, UnknownOptionListsThePassesOptions) {
  absl::Status status = ParseError("alpha{colour=red}");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "pass 'alpha' has no option 'colour'; valid options of 'alpha': count (int, default "
            "3), flag (bool, default false), label (string, default \"\"), mode (fast|slow, "
            "default fast)");
  EXPECT_EQ(ParseError("beta{x=1}").message(),
            "pass 'beta' has no option 'x'; pass 'beta' takes no options");
}

TEST(PipelineTest, BadValuesNameTheExpectedForm) {
  absl::Status status = ParseError("alpha{count=many}");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("pass 'alpha': option 'count' expects an integer, got 'many'; valid "
                        "options of 'alpha': count (int"));
  EXPECT_THAT(ParseError("alpha{flag=yes}").message(),
              HasSubstr("option 'flag' expects true or false, got 'yes'"));
  EXPECT_THAT(ParseError("alpha{mode=medium}").message(),
              HasSubstr("option 'mode' expects one of fast|slow, got 'medium'"));
  EXPECT_THAT(ParseError("alpha{count=}").message(),
              HasSubstr("option 'count' expects an integer, got ''"));
  EXPECT_THAT(ParseError("alpha{count=99999999999999999999}").message(),
              HasSubstr("expects an integer"));
  EXPECT_THAT(ParseError("alpha{count}").message(),
              HasSubstr("option 'count' of pass 'alpha' needs a value ('count=...')"));
}

TEST(PipelineTest, RepeatedOptionIsAnError) {
  EXPECT_EQ(ParseError("alpha{count=1,count=2}").message(),
            "option 'count' of pass 'alpha' is given twice");
}

TEST(PipelineTest, SyntaxErrorsNameTheColumn) {
  EXPECT_EQ(ParseError("beta,").message(),
            "malformed pass pipeline 'beta,' at column 6: expected a pass name, found the end");
  EXPECT_EQ(ParseError("beta alpha").message(),
            "malformed pass pipeline 'beta alpha' at column 6: expected ',' between passes, found "
            "'a'");
  EXPECT_EQ(ParseError("alpha{count=1").message(),
            "malformed pass pipeline 'alpha{count=1' at column 14: expected ',' or '}' after an "
            "option, found the end");
  EXPECT_EQ(ParseError(",beta").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseError("alpha{label=\"open").message(), HasSubstr("unterminated quoted value"));
  EXPECT_THAT(ParseError("alpha{=1}").message(), HasSubstr("expected an option name"));
}

// ---- The real registry ----------------------------------------------------------------

TEST(RegistryTest, IsSortedWithUniqueNamesAndParsableDefaults) {
  absl::Span<const PassInfo> passes = RegisteredPasses();
  ASSERT_FALSE(passes.empty());
  for (size_t i = 0; i < passes.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(passes[i - 1].name, passes[i].name);
    }
    EXPECT_FALSE(passes[i].description.empty()) << passes[i].name;
    EXPECT_EQ(passes[i].description.find('\n'), std::string::npos) << passes[i].name;
    // Creating with defaults parses every default (a malformed one aborts).
    std::unique_ptr<Pass> pass = passes[i].CreateWithDefaults();
    EXPECT_EQ(pass->name(), passes[i].name);
    EXPECT_EQ(FindRegisteredPass(passes[i].name), &passes[i]);
  }
  EXPECT_EQ(FindRegisteredPass("no-such-pass"), nullptr);
}

TEST(RegistryTest, PipelineOfRealPasses) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline("canonicalize{fold-constants=false, max-rewrites=10},cse,dce",
                        RegisteredPasses());
  ASSERT_TRUE(passes.ok()) << passes.status();
  ASSERT_EQ(passes->size(), 3u);
  const CanonicalizeOptions& options =
      static_cast<const CanonicalizePass&>(*(*passes)[0]).options();
  EXPECT_FALSE(options.fold_constants);
  EXPECT_EQ(options.max_rewrites, 10);
  absl::Status unknown = ParsePassPipeline("cse,frobnicate", RegisteredPasses()).status();
  std::string names;
  for (const PassInfo& info : RegisteredPasses()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", info.name);
  }
  EXPECT_EQ(std::string(unknown.message()),
            absl::StrCat("unknown pass 'frobnicate'; valid passes: ", names));
}

// Out-of-range values are usage errors (InvalidArgument) found when the pipeline is
// parsed, not pass failures when it runs.
TEST(RegistryTest, OutOfRangeOptionsAreUsageErrors) {
  struct Case {
    const char* pipeline;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"pipeline-collective-matmul{chunks=0}", "option 'chunks' must be at least 1, got 0"},
           {"pipeline-collective-matmul{streams=-3}", "option 'streams' must be at least 1, got -3"},
           {"propagate-sharding{iterations=101}",
            "option 'iterations' must be between 1 and 100, got 101"},
           {"propagate-sharding{iterations=0}",
            "option 'iterations' must be between 1 and 100, got 0"},
           {"canonicalize{max-rewrites=-2}", "option 'max-rewrites' must be at least -1, got -2"},
       }) {
    SCOPED_TRACE(c.pipeline);
    absl::Status status = ParsePassPipeline(c.pipeline, RegisteredPasses()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  for (const char* ok : {"pipeline-collective-matmul{chunks=1,streams=1}",
                         "propagate-sharding{iterations=100}", "canonicalize{max-rewrites=-1}"}) {
    EXPECT_TRUE(ParsePassPipeline(ok, RegisteredPasses()).ok()) << ok;
  }
}

TEST(RegistryTest, DescribePassesListsOptionsWithTypesAndDefaults) {
  EXPECT_EQ(DescribePasses(TestRegistry()),
            "alpha  Every kind of option\n"
            "    count: int = 3\n"
            "        an int\n"
            "    flag: bool = false\n"
            "        a bool\n"
            "    label: string = \"\"\n"
            "        a string\n"
            "    mode: fast|slow = fast\n"
            "        an enum\n"
            "beta   No options\n");
}

}  // namespace
}  // namespace commir
