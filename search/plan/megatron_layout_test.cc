// The Megatron layout step on the generator's single-device layer and head reproduces the
// laid-out programs layer_program.h wrote with its own annotations (the same module: the
// canonical prints of both agree byte for byte): GPT and
// Llama, tp x cp with and without sequence parallelism, grouped-query attention with tp > kv heads,
// a vocabulary to pad. And a function outside its rules is refused by name.
#include "search/plan/megatron_layout.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/fingerprint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {
namespace {

using ::testing::HasSubstr;

ModelSpec Model(const std::string& text) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}

// The layout of the module's one function, in memory, printed to be compared with the
// goldens' text. The module it builds is the one its print parses to (the same structural
// fingerprint): the parser infers the types the layout set in memory, so callers use the
// module as built.
absl::StatusOr<std::string> LaidOut(const Module& module, const MegatronLayoutOptions& options) {
  EXPECT_EQ(module.functions().size(), 1u);
  absl::StatusOr<std::unique_ptr<Module>> laid_out =
      MegatronLayoutModule(*module.functions()[0], options);
  if (!laid_out.ok()) return laid_out.status();
  const std::string text = PrintModule(**laid_out);
  absl::StatusOr<std::unique_ptr<Module>> parsed = ParseModuleOrError(text, "laid_out.commir");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (parsed.ok()) EXPECT_EQ(ModuleFingerprint(**parsed), ModuleFingerprint(**laid_out));
  return text;
}

// A test's program, parsed as the file t.commir.
std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "t.commir");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? *std::move(module) : std::make_unique<Module>();
}

MegatronLayoutOptions InFile(LayerLayout layout) {
  MegatronLayoutOptions o;
  o.layout = layout;
  o.file = "t.commir";
  return o;
}

struct Case {
  const char* model;
  LayerLayout layout;
  const char* golden;  // search/plan/testdata/GOLDEN.{layer,head}.commir
};

// A golden as the module it describes, printed canonically: the goldens are written as the
// generator wrote them (result types only where their operands do not imply them), the
// layout step builds the module and prints every type.
std::string ReadGolden(const std::string& name) {
  std::ifstream in("search/plan/testdata/" + name);
  EXPECT_TRUE(in.good()) << name;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, name);
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? PrintModule(**module) : text;
}

// The goldens are the laid-out programs layer_program.h wrote with its own annotations
// before the generator was made single-device and laid out by this step; the layers'
// were rewritten (`print_layer_program MODEL TP CP SP MB`) when Q, K and V became one
// fused projection, and read by hand: the one QKV weight's columns split over tp when tp
// divides the key/value heads, whole otherwise (llama3-70b at tp 16, kv_heads=4 at tp 8).
TEST(MegatronLayout, ReproducesTheGeneratorsLaidOutPrograms) {
  const Case cases[] = {
      {"gpt3-1.3b", {1, 1, false, 1}, "gpt3-1.3b_tp1_cp1_mb1"},
      {"gpt3-1.3b", {4, 1, true, 2}, "gpt3-1.3b_tp4_cp1_sp_mb2"},
      {"gpt3-1.3b", {2, 4, false, 1}, "gpt3-1.3b_tp2_cp4_mb1"},
      {"gpt3-1.3b", {8, 2, true, 1}, "gpt3-1.3b_tp8_cp2_sp_mb1"},
      {"gpt3-1.3b", {4, 2, true, 2}, "gpt3-1.3b_tp4_cp2_sp_mb2"},
      {"llama3-8b", {1, 2, false, 1}, "llama3-8b_tp1_cp2_mb1"},
      {"llama3-8b", {8, 1, true, 4}, "llama3-8b_tp8_cp1_sp_mb4"},
      {"llama3-8b", {4, 2, false, 1}, "llama3-8b_tp4_cp2_mb1"},
      {"llama3-70b", {16, 2, true, 1}, "llama3-70b_tp16_cp2_sp_mb1"},  // tp > kv heads
      {"llama3-70b,kv_heads=4", {8, 1, false, 2}, "llama3-70b_kv_heads4_tp8_cp1_mb2"},
  };
  for (const Case& c : cases) {
    const ModelSpec m = Model(c.model);
    SCOPED_TRACE(c.golden);
    absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(m, c.layout.micro_batch);
    absl::StatusOr<std::unique_ptr<Module>> head = SingleDeviceHead(m, c.layout.micro_batch);
    ASSERT_TRUE(layer.ok() && head.ok());
    const std::string expected_layer = ReadGolden(absl::StrCat(c.golden, ".layer.commir"));
    const std::string expected_head = ReadGolden(absl::StrCat(c.golden, ".head.commir"));

    absl::StatusOr<std::string> laid_out = LaidOut(**layer, {c.layout});
    ASSERT_TRUE(laid_out.ok()) << laid_out.status();
    EXPECT_EQ(*laid_out, expected_layer);
    absl::StatusOr<std::string> head_laid_out =
        LaidOut(**head, {c.layout, m.vocabulary});
    ASSERT_TRUE(head_laid_out.ok()) << head_laid_out.status();
    EXPECT_EQ(*head_laid_out, expected_head);

    // And the programs the plan search costs (built in memory) are these goldens too.
    absl::StatusOr<std::unique_ptr<Module>> layer_program = TransformerLayerProgram(m, c.layout);
    absl::StatusOr<std::unique_ptr<Module>> head_program = HeadProgram(m, c.layout);
    ASSERT_TRUE(layer_program.ok()) << layer_program.status();
    ASSERT_TRUE(head_program.ok()) << head_program.status();
    EXPECT_EQ(PrintModule(**layer_program), expected_layer);
    EXPECT_EQ(PrintModule(**head_program), expected_head);
  }
}

TEST(MegatronLayout, AnExtraElementwiseOpIsLaidOutWithItsOperand) {
  const ModelSpec m = Model("llama3-8b");
  absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(m, 1);
  ASSERT_TRUE(layer.ok());
  const std::string edited = absl::StrReplaceAll(
      PrintModule(**layer), {{"  %a = mul(%s, %w) : bf16[1, 8192, 14336]\n",
                              "  %a0 = mul(%s, %w) : bf16[1, 8192, 14336]\n"
                              "  %a = tanh(%a0) : bf16[1, 8192, 14336]\n"}});
  absl::StatusOr<std::string> laid_out = LaidOut(*Parse(edited), {LayerLayout{4, 1, true, 1}});
  ASSERT_TRUE(laid_out.ok()) << laid_out.status();
  EXPECT_THAT(*laid_out,
              HasSubstr("  %a = tanh(%a0) : bf16[1, 8192, 14336@tp]\n"
                        "  %dn = matmul(%a, %w2) : bf16[1, 8192@tp, 4096]"));
}

TEST(MegatronLayout, AnOpOutsideTheRulesIsNamed) {
  constexpr char kText[] = R"(
func @layer(%x: f32[2, 8, 16], %w: f32[16, 16]) -> f32[2, 8] {
  %h = matmul(%x, %w)
  %s = reduce_sum(%h) {dims = [2]}
  return %s
}
)";
  absl::StatusOr<std::string> laid_out = LaidOut(*Parse(kText), InFile({2, 1, false, 2}));
  EXPECT_FALSE(laid_out.ok());
  EXPECT_THAT(laid_out.status().message(), HasSubstr("t.commir:3:8: @layer: the Megatron layout: "));
  EXPECT_THAT(laid_out.status().message(), HasSubstr("a matmul neither after a norm"));
}

TEST(MegatronLayout, AnotherMicroBatchOrNameIsHandled) {
  const ModelSpec m = Model("gpt3-1.3b");
  absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(m, 2);
  ASSERT_TRUE(layer.ok());
  absl::StatusOr<std::string> wrong =
      LaidOut(**layer, {LayerLayout{4, 1, true, 4}});
  EXPECT_THAT(wrong.status().message(), HasSubstr("written for micro-batch 2, not 4"));
  // A layer function under another name, renamed back by the options: the golden (not
  // this step's output on the original name).
  std::unique_ptr<Module> block = (*layer)->Clone();
  ASSERT_EQ(block->functions().size(), 1u);
  block->functions()[0]->set_name("block");
  absl::StatusOr<std::string> renamed = LaidOut(*block, {LayerLayout{4, 1, true, 2}, 0, "layer"});
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(*renamed, ReadGolden("gpt3-1.3b_tp4_cp1_sp_mb2.layer.commir"));
}

// The head's vocabulary is padded to a multiple of 128 x tp (Megatron-LM's
// make-vocab-size-divisible-by 128, times tp) and split over tp: GPT-3's 50,257 tokens
// become, worked by hand, 50,304 (393 x 128), 50,432 (197 x 256), 50,688 (99 x 512) and
// 51,200 (50 x 1,024) for tp = 1, 2, 4, 8. GPT's head multiplies by the embedding's table
// [vocabulary, hidden] transposed (tied), so its rows are padded and split.
TEST(MegatronLayout, TheHeadsVocabularyIsPaddedTo128TimesTp) {
  const ModelSpec m = Model("gpt3-1.3b");
  ASSERT_EQ(m.vocabulary, 50257);
  absl::StatusOr<std::unique_ptr<Module>> head = SingleDeviceHead(m, 1);
  ASSERT_TRUE(head.ok());
  const std::pair<int64_t, const char*> cases[] = {
      {2, "%wemb: bf16[50432@tp, 2048]"},
      {4, "%wemb: bf16[50688@tp, 2048]"},
      {8, "%wemb: bf16[51200@tp, 2048]"},
  };
  for (const auto& [tp, weight] : cases) {
    absl::StatusOr<std::string> laid_out =
        LaidOut(**head, {LayerLayout{tp, 1, false, 1}, m.vocabulary});
    ASSERT_TRUE(laid_out.ok()) << laid_out.status();
    EXPECT_THAT(*laid_out, HasSubstr(weight)) << "tp=" << tp;
  }
  absl::StatusOr<std::string> one =
      LaidOut(**head, {LayerLayout{1, 1, false, 1}, m.vocabulary});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, HasSubstr("50304"));
}

TEST(MegatronLayout, AViewOfAWeightIsAnErrorNotACrash) {
  constexpr char kText[] = R"(
func @layer(%x: f32[2, 8, 16], %w: f32[16, 16]) -> f32[2, 8, 16] {
  %t = transpose(%w) {perm = [1, 0]}
  %r = add(%x, %x)
  return %r
}
)";
  absl::StatusOr<std::string> laid_out = LaidOut(*Parse(kText), InFile({2, 1, false, 2}));
  EXPECT_THAT(laid_out.status().message(),
              HasSubstr("`transpose` of a value no rule has laid out"));
}

}  // namespace
}  // namespace commir::search::plan
