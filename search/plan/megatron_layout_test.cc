// The Megatron layout step on the generator's single-device layer and head reproduces,
// byte for byte, the laid-out programs layer_program.h writes: GPT and Llama, tp x cp
// with and without sequence parallelism, grouped-query attention with tp > kv heads, a
// vocabulary to pad. And a function outside its rules is refused by name.
#include "search/plan/megatron_layout.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

struct Case {
  const char* model;
  LayerLayout layout;
};

TEST(MegatronLayout, ReproducesTheGeneratedPrograms) {
  const Case cases[] = {
      {"gpt3-1.3b", {1, 1, false, 1}},   {"gpt3-1.3b", {4, 1, true, 2}},
      {"gpt3-1.3b", {2, 4, false, 1}},   {"gpt3-1.3b", {8, 2, true, 1}},
      {"llama3-8b", {1, 2, false, 1}},   {"llama3-8b", {8, 1, true, 4}},
      {"llama3-8b", {4, 2, false, 1}},   {"llama3-70b", {16, 2, true, 1}},  // tp > kv heads
      {"llama3-70b,kv_heads=4", {8, 1, false, 2}},                         // tp > kv heads
  };
  for (const Case& c : cases) {
    const ModelSpec m = Model(c.model);
    SCOPED_TRACE(absl::StrCat(c.model, " tp=", c.layout.tp, " cp=", c.layout.cp,
                              c.layout.sequence_parallel ? " sp" : "", " mb=", c.layout.micro_batch));
    absl::StatusOr<FunctionText> layer = SingleDeviceLayer(m, c.layout.micro_batch);
    absl::StatusOr<FunctionText> head = SingleDeviceHead(m, c.layout.micro_batch);
    ASSERT_TRUE(layer.ok() && head.ok());
    absl::StatusOr<std::string> laid_out =
        MegatronLayoutText(layer->Print(), {c.layout});
    ASSERT_TRUE(laid_out.ok()) << laid_out.status();
    absl::StatusOr<std::string> expected = TransformerLayerProgram(m, c.layout);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(*laid_out, *expected);

    absl::StatusOr<std::string> head_laid_out =
        MegatronLayoutText(head->Print(), {c.layout, m.vocabulary});
    ASSERT_TRUE(head_laid_out.ok()) << head_laid_out.status();
    absl::StatusOr<std::string> expected_head = HeadProgram(m, c.layout);
    ASSERT_TRUE(expected_head.ok()) << expected_head.status();
    EXPECT_EQ(*head_laid_out, *expected_head);
  }
}

TEST(MegatronLayout, AnExtraElementwiseOpIsLaidOutWithItsOperand) {
  const ModelSpec m = Model("llama3-8b");
  absl::StatusOr<FunctionText> layer = SingleDeviceLayer(m, 1);
  ASSERT_TRUE(layer.ok());
  const std::string edited =
      absl::StrReplaceAll(layer->Print(), {{"  %a = mul(%s, %w)\n", "  %a0 = mul(%s, %w)\n  %a = tanh(%a0)\n"}});
  absl::StatusOr<std::string> laid_out =
      MegatronLayoutText(edited, {LayerLayout{4, 1, true, 1}});
  ASSERT_TRUE(laid_out.ok()) << laid_out.status();
  EXPECT_THAT(*laid_out, HasSubstr("  %a = tanh(%a0)\n  %dn = matmul(%a, %w2) : bf16[1, 8192@tp, 4096]"));
}

TEST(MegatronLayout, AnOpOutsideTheRulesIsNamed) {
  constexpr char kText[] = R"(
func @layer(%x: f32[2, 8, 16], %w: f32[16, 16]) -> f32[2, 8] {
  %h = matmul(%x, %w)
  %s = reduce_sum(%h) {dims = [2]}
  return %s
}
)";
  absl::StatusOr<std::string> laid_out = MegatronLayoutText(kText, {LayerLayout{2, 1, false, 2}});
  EXPECT_FALSE(laid_out.ok());
  EXPECT_THAT(laid_out.status().message(), HasSubstr("@layer at 3:"));
  EXPECT_THAT(laid_out.status().message(), HasSubstr("a matmul neither after a norm"));
}

TEST(MegatronLayout, AnotherMicroBatchOrNameIsHandled) {
  const ModelSpec m = Model("gpt3-1.3b");
  absl::StatusOr<FunctionText> layer = SingleDeviceLayer(m, 2);
  ASSERT_TRUE(layer.ok());
  absl::StatusOr<std::string> wrong = MegatronLayoutText(layer->Print(), {LayerLayout{2, 1, true, 4}});
  EXPECT_THAT(wrong.status().message(), HasSubstr("written for micro-batch 2, not 4"));
  absl::StatusOr<std::string> renamed = MegatronLayoutText(
      absl::StrReplaceAll(layer->Print(), {{"@layer", "@block"}}), {LayerLayout{2, 1, true, 2}, 0, "layer"});
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(*renamed, *TransformerLayerProgram(m, LayerLayout{2, 1, true, 2}));
}

}  // namespace
}  // namespace commir::search::plan
