// Typed pipelines: the option schema drives the text parser, the range checks and
// --list-passes; a pipeline built from typed options runs to the module commir-opt's
// goldens expect for the same pipeline written as text.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/printer.h"
#include "transforms/canonicalize.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"
#include "transforms/sharding/spmd_pipeline.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using schedules::PipelineCollectiveMatmulOptions;
using schedules::PipelineCollectiveMatmulPass;
using schedules::RingAttentionOptions;
using schedules::RingAttentionPass;
using schedules::RingCollectiveMatmulOptions;
using schedules::RingCollectiveMatmulPass;
using schedules::UlyssesAttentionOptions;
using schedules::UlyssesAttentionPass;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `pipeline` on the program of testdata/schedules/NAME.commir and returns the
// printed result ("" on failure).
std::string RunOnCase(const std::string& name, const Pipeline& pipeline) {
  std::unique_ptr<Module> m =
      testing::ParseForTest(ReadFile(absl::StrCat("testdata/schedules/", name, ".commir")));
  if (m == nullptr) return "";
  absl::Status s = RunPipeline(*m, pipeline, {.verify_each = true});
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? PrintModule(*m) : "";
}

// The text of each case's RUN line, written out here: the goldens were made from it.
TEST(TypedPipeline, TypedAndTextPipelinesGiveTheGoldenModule) {
  struct Case {
    const char* name;
    const char* text;
    Pipeline typed;
  };
  const Case cases[] = {
      {"pipeline_mlp",
       "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,"
       "pipeline-collective-matmul{chunks=2,streams=2}",
       sharding::DefaultSpmdPipeline().Then(PassStep::Of<PipelineCollectiveMatmulPass>(
           PipelineCollectiveMatmulOptions{.chunks = 2, .streams = 2}))},
      {"attention_usp",
       "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,"
       "ulysses-attention{axes=b},ring-attention{axes=a}",
       sharding::DefaultSpmdPipeline()
           .Then(PassStep::Of<UlyssesAttentionPass>(UlyssesAttentionOptions{.axes = "b"}))
           .Then(PassStep::Of<RingAttentionPass>(RingAttentionOptions{.axes = "a"}))},
      {"ring_cm_mlp_bi",
       "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,"
       "ring-collective-matmul{direction=bi}",
       sharding::DefaultSpmdPipeline().Then(PassStep::Of<RingCollectiveMatmulPass>(
           RingCollectiveMatmulOptions{.direction = schedules::RingDirection::kBi}))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string golden = ReadFile(absl::StrCat("testdata/schedules/", c.name, ".golden"));
    ASSERT_FALSE(golden.empty());
    EXPECT_EQ(RunOnCase(c.name, c.typed), golden);
    absl::StatusOr<Pipeline> parsed = ParsePipeline(c.text, RegisteredPasses());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(RunOnCase(c.name, *parsed), golden);
  }
}

TEST(TypedPipeline, RunChecksTypedOptionsAgainstTheSchemaAsTheParserDoes) {
  std::unique_ptr<Module> m = testing::ParseForTest("mesh @m(tp=2)\n");
  ASSERT_NE(m, nullptr);
  const Pipeline zero_chunks{{PassStep::Of<PipelineCollectiveMatmulPass>({.chunks = 0})}};
  absl::Status typed = RunPipeline(*m, zero_chunks);
  EXPECT_EQ(typed.code(), absl::StatusCode::kInvalidArgument);
  absl::Status text =
      ParsePipeline("pipeline-collective-matmul{chunks=0}", RegisteredPasses()).status();
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  // The same message, naming the pass, the option, its bound and the value.
  EXPECT_EQ(typed.message(), text.message());
  EXPECT_THAT(std::string(typed.message()),
              HasSubstr("pass 'pipeline-collective-matmul': option 'chunks' must be at least 1, "
                        "got 0; valid options of 'pipeline-collective-matmul': chunks (int >= 1, "
                        "default 4), streams (int >= 1, default 2)"));
  const Pipeline many_rounds{
      {PassStep::Of<sharding::PropagateShardingPass>({.iterations = 101})}};
  EXPECT_THAT(std::string(RunPipeline(*m, many_rounds).message()),
              HasSubstr("option 'iterations' must be between 1 and 100, got 101"));
}

TEST(TypedPipeline, TextFormNamesOptionsThatDifferFromTheDefaults) {
  EXPECT_EQ(sharding::DefaultSpmdPipeline().ToString(), sharding::kDefaultSpmdPipeline);
  EXPECT_EQ(sharding::DefaultSpmdPipeline(/*propagate=*/false).ToString(),
            "lower-to-spmd,canonicalize,cse,dce,combine-all-reduces");
  EXPECT_EQ(sharding::PartitionPipeline().ToString(), sharding::kPartitionPipeline);
  EXPECT_EQ(sharding::PartitionPipeline(/*propagate=*/false).ToString(),
            "lower-to-spmd,canonicalize,cse,dce");
  EXPECT_EQ(PassStep::Of<PipelineCollectiveMatmulPass>({.chunks = 8, .streams = 4}).ToString(),
            "pipeline-collective-matmul{chunks=8,streams=4}");
  EXPECT_EQ(PassStep::Of<PipelineCollectiveMatmulPass>({.chunks = 8}).ToString(),
            "pipeline-collective-matmul{chunks=8}");
  EXPECT_EQ(PassStep::Of<CanonicalizePass>({.fold_constants = false}).ToString(),
            "canonicalize{fold-constants=false}");
  // A value with the syntax's separators is quoted, and parses back to itself.
  const PassStep two_axes = PassStep::Of<RingAttentionPass>({.zigzag = true, .axes = "dp,sp"});
  EXPECT_EQ(two_axes.ToString(), R"(ring-attention{zigzag=true,axes="dp,sp"})");
  absl::StatusOr<Pipeline> back = ParsePipeline(two_axes.ToString(), RegisteredPasses());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->steps.size(), 1u);
  std::unique_ptr<Pass> pass = back->steps[0].Create();
  const RingAttentionOptions& options = static_cast<RingAttentionPass&>(*pass).options();
  EXPECT_TRUE(options.zigzag);
  EXPECT_EQ(options.axes, "dp,sp");
}

// Code that reads a parsed pipeline gets each step's typed struct: the values written in
// the text, and the struct's defaults for the rest.
TEST(TypedPipeline, AParsedStepReadsAsItsPassesOptions) {
  absl::StatusOr<Pipeline> parsed = ParsePipeline(
      "pipeline-collective-matmul{chunks=8},ring-collective-matmul{direction=bi}",
      RegisteredPasses());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->steps.size(), 2u);
  const PassStep& pipelined = parsed->steps[0];
  EXPECT_TRUE(pipelined.Is<PipelineCollectiveMatmulPass>());
  EXPECT_FALSE(pipelined.Is<RingCollectiveMatmulPass>());
  const PipelineCollectiveMatmulOptions options =
      pipelined.OptionsOf<PipelineCollectiveMatmulPass>();
  EXPECT_EQ(options.chunks, 8);
  EXPECT_EQ(options.streams, 2);  // left out: the default
  EXPECT_EQ(parsed->steps[1].OptionsOf<RingCollectiveMatmulPass>().direction,
            schedules::RingDirection::kBi);
}

// --list-passes shows each row from the schema: the types, bounds and defaults written
// here are the struct initializers' and the schema's ranges.
TEST(TypedPipeline, ListPassesShowsTheSchema) {
  const std::string listed = DescribePasses(RegisteredPasses());
  EXPECT_THAT(listed, HasSubstr("    chunks: int >= 1 = 4\n"));
  EXPECT_THAT(listed, HasSubstr("    streams: int >= 1 = 2\n"));
  EXPECT_THAT(listed, HasSubstr("    iterations: int in 1..100 = 1\n"));
  EXPECT_THAT(listed, HasSubstr("    max-rewrites: int >= -1 = -1\n"));
  EXPECT_THAT(listed, HasSubstr("    direction: uni|bi = uni\n"));
  EXPECT_THAT(listed, HasSubstr("    grad-type: same|f32|f64 = same\n"));
  EXPECT_THAT(listed, HasSubstr("    lr: string = 0.05\n"));
  EXPECT_THAT(listed, HasSubstr("    axes: string = \"\"\n"));
}

}  // namespace
}  // namespace commir
