#include "search/plan/model_spec.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace commir::search::plan {
namespace {

// Published totals: GPT-3 (Brown et al. 2020, Table 2.1) and Llama 3 (Dubey et al.
// 2024, Table 3 and the released configs: 8.03B, 70.6B, 405.9B).
struct Published {
  const char* name;
  double parameters;
  double tolerance;  // relative: GPT-3's names are rounded ("1.3B")
};

TEST(ModelSpecTest, PresetParameterCountsMatchPublishedTotals) {
  for (const Published& p :
       {Published{"gpt3-1.3b", 1.3e9, 0.03}, Published{"gpt3-13b", 13.0e9, 0.03},
        Published{"gpt3-175b", 175.0e9, 0.01}, Published{"llama3-8b", 8.03e9, 0.002},
        Published{"llama3-70b", 70.6e9, 0.002}, Published{"llama3-405b", 405.9e9, 0.002}}) {
    absl::StatusOr<ModelSpec> m = Preset(p.name);
    ASSERT_TRUE(m.ok()) << m.status();
    const double total = static_cast<double>(TotalParameters(*m));
    EXPECT_LT(std::abs(total - p.parameters) / p.parameters, p.tolerance)
        << p.name << ": " << total;
  }
}

TEST(ModelSpecTest, Gpt3LayerIsTwelveHiddenSquaredPlusBiasesAndNorms) {
  ModelSpec m = *Preset("gpt3-175b");
  EXPECT_EQ(LayerParameters(m), 12 * m.hidden * m.hidden + 13 * m.hidden);
}

TEST(ModelSpecTest, ModelFlopsMatchNarayananFormulaForGpt) {
  // Narayanan et al. 2021 (Megatron-LM at scale), eq. 3:
  // 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
  ModelSpec m = *Preset("gpt3-175b");
  const double B = m.global_batch, s = m.sequence, l = m.layers, h = m.hidden, V = m.vocabulary;
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(ModelFlopsPerIteration(m) / expected, 1.0, 1e-12);
}

TEST(ModelSpecTest, ParsesPresetWithOverridesAndFullForm) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec("llama3-8b, seq=4096, global_batch=64");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layers, 32);
  EXPECT_EQ(m->sequence, 4096);
  EXPECT_EQ(m->global_batch, 64);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(FormatModelSpec(*m));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FormatModelSpec(*again), FormatModelSpec(*m));

  absl::StatusOr<ModelSpec> tiny = ParseModelSpec(
      "arch=gpt,layers=2,hidden=64,heads=4,ffn=256,seq=32,vocab=100,global_batch=8,dtype=f32");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->kv_heads, 4);  // multi-head when unspecified
  EXPECT_EQ(tiny->dtype, ElementType::kF32);
}

TEST(ModelSpecTest, RefusesBadDescriptionsWithTheirReason) {
  auto error = [](const std::string& text) {
    absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
    return m.ok() ? std::string("accepted") : std::string(m.status().message());
  };
  EXPECT_NE(error("gpt5").find("no model preset 'gpt5'"), std::string::npos);
  EXPECT_NE(error("llama3-8b,depth=3").find("unknown key 'depth'"), std::string::npos);
  EXPECT_NE(error("llama3-8b,layers=-2").find("positive integer"), std::string::npos);
  EXPECT_NE(error("llama3-8b,layers").find("not key=value"), std::string::npos);
  EXPECT_NE(error("llama3-8b,dtype=i32").find("bf16, f16 or f32"), std::string::npos);
  EXPECT_NE(error("llama3-8b,heads=30").find("must divide hidden"), std::string::npos);
  EXPECT_NE(error("llama3-8b,kv_heads=5").find("must divide heads"), std::string::npos);
  EXPECT_NE(error("layers=2,hidden=64").find("must be set"), std::string::npos);
  EXPECT_NE(error("").find("empty"), std::string::npos);
}

}  // namespace
}  // namespace commir::search::plan
