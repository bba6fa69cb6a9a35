#include "search/verify.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/test_programs.h"
#include "transforms/pass.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"

namespace commir::search {
namespace {

using ::testing::HasSubstr;

// The recipe read from `text`, as commir-search reads its input, then checked.
absl::StatusOr<VerifyOutcome> VerifyText(absl::string_view text, absl::string_view function,
                                         absl::string_view pipeline,
                                         const VerifyOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "verify_test.commir");
  if (!module.ok()) return module.status();
  return VerifyRecipe(**module, function, pipeline, options);
}

std::string Printed(const std::unique_ptr<Module>& module) {
  return module == nullptr ? "(none)" : PrintModule(*module);
}

struct Recipe {
  std::string program;
  std::string function;
  std::string pipeline;
};

void ExpectVerified(const Recipe& recipe, const VerifyOptions& options = {}) {
  SCOPED_TRACE(recipe.pipeline);
  absl::StatusOr<VerifyOutcome> outcome =
      VerifyText(recipe.program, recipe.function, recipe.pipeline, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched) << outcome->report << Printed(outcome->lowered_program);
  EXPECT_FALSE(outcome->report.empty());
  EXPECT_GE(outcome->seconds, 0);
}

// The example with its mesh line replaced by `mesh`.
std::string OnMesh(absl::string_view example, absl::string_view old_mesh,
                   absl::string_view mesh) {
  return absl::StrReplaceAll(Example(example), {{old_mesh, mesh}});
}

TEST(VerifyRecipe, LlamaLayerVerifiesShrunkOnMeshesOf8) {
  for (const auto& [mesh, seq, tp] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tp=8", "tp", "tp"}, {"sp=2, tp=4", "sp", "tp"}}) {
    SCOPED_TRACE(mesh);
    std::string program = LlamaLayer(mesh, seq, tp);
    absl::StatusOr<VerifyOutcome> outcome = VerifyText(program, "attention", "");
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_TRUE(outcome->matched) << outcome->report;
    EXPECT_THAT(outcome->sizes, HasSubstr("4096->16"));
    EXPECT_THAT(Printed(outcome->checked_program), HasSubstr("f32[16, 32, 16]"));
    ExpectVerified({program, "attention", "ring-collective-matmul{direction=bi}"});
    ExpectVerified({program, "mlp", "pipeline-collective-matmul{chunks=2}"});
    ExpectVerified({program, "mlp", "ring-collective-matmul"});
  }
}

TEST(VerifyRecipe, LlamaLayerRingAttentionOverTheSequenceAxisOf2x4) {
  std::string program = LlamaLayer("sp=2, tp=4", "sp", "tp");
  for (const char* pipeline : {"ring-attention", "ring-attention{zigzag=true}"}) {
    SCOPED_TRACE(pipeline);
    absl::StatusOr<VerifyOutcome> outcome = VerifyText(program, "attention", pipeline);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_TRUE(outcome->matched) << outcome->report;
    // The k/v gathers over sp became a ring of shifts.
    EXPECT_THAT(Printed(outcome->lowered_program), HasSubstr("shift("));
  }
}

TEST(VerifyRecipe, SequenceParallelAttentionSchedulesOn2To8Devices) {
  for (const char* mesh : {"sp=2", "sp=4", "sp=8", "dp=2, sp=4"}) {
    SCOPED_TRACE(mesh);
    std::string program = OnMesh("attention", "sp=4", mesh);
    for (const char* pipeline : {"", "ring-attention", "ring-attention{zigzag=true}"}) {
      ExpectVerified({program, "attention", pipeline});
    }
  }
  // Ulysses needs the 4 heads to split over the sequence axis.
  for (const char* mesh : {"sp=2", "sp=4"}) {
    ExpectVerified({OnMesh("attention", "sp=4", mesh), "attention", "ulysses-attention"});
  }
}

TEST(VerifyRecipe, TensorParallelExamplesOn2To8Devices) {
  for (const char* mesh : {"tp=2", "tp=4", "tp=8", "dp=2, tp=4"}) {
    SCOPED_TRACE(mesh);
    for (const char* pipeline : {"", "ring-collective-matmul{direction=bi}"}) {
      ExpectVerified({OnMesh("mlp", "tp=4", mesh), "mlp", pipeline});
      ExpectVerified({OnMesh("transformer_block", "tp=4", mesh), "block", pipeline});
    }
  }
  ExpectVerified({Example("ag_matmul"), "ag_matmul", "pipeline-collective-matmul{chunks=2}"});
}

TEST(VerifyRecipe, CompletePipelineAsCommirOptRunsIt) {
  VerifyOptions options;
  options.pipeline_is_complete = true;
  std::string program = OnMesh("attention", "sp=4", "sp=8");
  ExpectVerified({program, "attention",
                  "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,ring-attention"},
                 options);
  // A pipeline that does not lower the function proves nothing.
  absl::StatusOr<VerifyOutcome> unlowered = VerifyText(program, "attention", "cse", options);
  ASSERT_FALSE(unlowered.ok());
  EXPECT_THAT(unlowered.status().message(), HasSubstr("unlowered"));
}

TEST(VerifyRecipe, PipelineChunksOfABlockSplit8WaysGetTheDivisibilityTheyNeed) {
  // lcm(8, 16) leaves 2 rows per device; 8 chunks need 8.
  absl::StatusOr<VerifyOutcome> outcome =
      VerifyText(Example("ag_matmul"), "ag_matmul", "pipeline-collective-matmul{chunks=8}");
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched) << outcome->report;
  EXPECT_THAT(outcome->sizes, HasSubstr("1024->64"));
  EXPECT_THAT(Printed(outcome->lowered_program), HasSubstr("all_gather"));
}

TEST(VerifyRecipe, SmallProgramsAreCheckedAsTheyAre) {
  VerifyOptions options;
  options.max_elements_per_value = 1 << 20;
  absl::StatusOr<VerifyOutcome> outcome = VerifyText(Example("mlp"), "mlp", "", options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched);
  EXPECT_EQ(outcome->sizes, "unchanged");
  EXPECT_THAT(Printed(outcome->checked_program), HasSubstr("f32[256@tp, 128]"));
}

// A broken schedule: negates the first result of every spmd function.
class NegateResultsPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    for (Function* function : module.functions()) {
      if (!function->is_spmd()) continue;
      Operation* ret = function->body()->terminator();
      Value* result = ret->operand(0);
      Operation* neg = function->body()->InsertBefore(
          ret, Operation::Create(GetOpDef(OpKind::kNeg), {result}, {result->type()}, {}));
      ret->SetOperand(0, neg->result(0));
    }
    return absl::OkStatus();
  }
};

TEST(VerifyRecipe, BrokenPassIsAMismatch) {
  static const std::vector<PassInfo>* table = [] {
    auto* passes = new std::vector<PassInfo>(RegisteredPasses().begin(), RegisteredPasses().end());
    passes->push_back({"negate-results", "breaks the program", {}, MakePass<NegateResultsPass>});
    return passes;
  }();
  VerifyOptions options;
  options.passes = *table;
  for (const char* pipeline : {"negate-results", "ring-attention,negate-results"}) {
    SCOPED_TRACE(pipeline);
    absl::StatusOr<VerifyOutcome> outcome =
        VerifyText(OnMesh("attention", "sp=4", "sp=8"), "attention", pipeline, options);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_FALSE(outcome->matched);
    EXPECT_THAT(outcome->report, HasSubstr("result0"));
  }
  // The same table without the broken pass matches.
  absl::StatusOr<VerifyOutcome> outcome =
      VerifyText(OnMesh("attention", "sp=4", "sp=8"), "attention", "ring-attention", options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched);
}

TEST(VerifyRecipe, UnshrinkableProgramSaysWhy) {
  absl::StatusOr<VerifyOutcome> outcome = VerifyText(R"(
mesh @m(tp=2)
func @f(%x: f32[600@tp, 400]) -> f32[400, 600] {
  %y = reshape(%x) : f32[400, 600]
  return %y
}
)",
                                                       "f", "");
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("cannot be shrunk"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("does not factor"));
}

TEST(VerifyRecipe, ChecksCopiesAndLeavesTheRecipeAsItWas) {
  absl::StatusOr<std::unique_ptr<Module>> module =
      ParseModuleOrError(Example("mlp"), "mlp.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const std::string before = PrintModule(**module);
  VerifyOptions options;
  options.max_elements_per_value = 1 << 20;
  absl::StatusOr<VerifyOutcome> small = VerifyRecipe(**module, "mlp", "", options);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(small->matched) << small->report;
  // Checked as it is: a copy that prints as the recipe does.
  EXPECT_EQ(Printed(small->checked_program), before);
  options.max_elements_per_value = 1 << 12;
  absl::StatusOr<VerifyOutcome> shrunk =
      VerifyRecipe(**module, "mlp", "ring-collective-matmul", options);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_TRUE(shrunk->matched) << shrunk->report;
  EXPECT_NE(shrunk->sizes, "unchanged");
  EXPECT_EQ(PrintModule(**module), before);
}

TEST(VerifyRecipe, BadRecipesAreErrors) {
  EXPECT_EQ(VerifyText(Example("mlp"), "nope", "").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<VerifyOutcome> unknown_pass = VerifyText(Example("mlp"), "mlp", "no-such-pass");
  ASSERT_FALSE(unknown_pass.ok());
  EXPECT_THAT(unknown_pass.status().message(), HasSubstr("no-such-pass"));
}

}  // namespace
}  // namespace commir::search
