#include "search/plan/model_spec.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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

TEST(ModelSpecTest, EverySizeIsBoundedAndTheMessageSaysTheBound) {
  auto error = [](const std::string& text) {
    absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
    return m.ok() ? std::string("accepted") : std::string(m.status().message());
  };
  // Each key just above its bound, and far above (int64's largest, and beyond it).
  const std::vector<std::pair<std::string, int64_t>> bounds = {
      {"layers", 4096},        {"hidden", 131072}, {"heads", 16384},
      {"kv_heads", 16384},     {"ffn", 524288},    {"seq", 1048576},
      {"vocab", 4194304},      {"global_batch", 1048576}};
  for (const auto& [key, bound] : bounds) {
    const std::string at_most = absl::StrCat("at most ", bound, ")");
    for (const std::string& value :
         {absl::StrCat(bound + 1), std::string("9223372036854775807"),
          std::string("100000000000000000000")}) {
      // A small valid model with this one key out of bounds.
      std::string spec = absl::StrCat(key, "=", value);
      for (const std::string& other :
           {std::string("arch=llama"), std::string("layers=2"), std::string("hidden=64"),
            std::string("heads=4"), std::string("ffn=128"), std::string("seq=8"),
            std::string("vocab=100"), std::string("global_batch=4")}) {
        if (other.substr(0, other.find('=')) != key) absl::StrAppend(&spec, ",", other);
      }
      const std::string message = error(spec);
      EXPECT_NE(message.find(absl::StrCat("model: ", key, "=")), std::string::npos) << message;
      EXPECT_NE(message.find(at_most), std::string::npos) << spec << ": " << message;
    }
  }
  // The bounds themselves are accepted (kv_heads must still divide heads).
  EXPECT_EQ(error("llama3-8b,layers=4096"), "accepted");
  EXPECT_EQ(error("llama3-8b,seq=1048576,global_batch=4096"), "accepted");
  // The preset's sizes that --emit-model and the search once multiplied into an
  // allocation of gigabytes or an int64 overflow.
  EXPECT_NE(error("llama3-8b,layers=10000000").find("too large (at most 4096)"),
            std::string::npos);
  EXPECT_NE(error("llama3-8b,layers=1152921504606846976").find("at most 4096"), std::string::npos);
  EXPECT_NE(error("llama3-8b,hidden=1099511627776").find("hidden=1099511627776: too large"),
            std::string::npos);
  // Tokens per iteration are bounded as a product too.
  EXPECT_NE(error("llama3-8b,seq=1048576,global_batch=1048576").find("tokens per iteration"),
            std::string::npos);
}

TEST(ModelSpecTest, ValidateBoundsSizesSetInCode) {
  ModelSpec m = *Preset("llama3-8b");
  m.layers = int64_t{1} << 60;
  absl::Status s = Validate(m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layers=1152921504606846976 is too large (at most 4096)"),
            std::string::npos)
      << s;
  // At the bounds the products stay inside int64.
  m = *Preset("llama3-8b");
  m.layers = kMaxLayers;
  m.hidden = kMaxHidden;
  m.heads = kMaxHeads;
  m.kv_heads = kMaxHeads;
  m.ffn = kMaxFfn;
  m.vocabulary = kMaxVocabulary;
  ASSERT_TRUE(Validate(m).ok()) << Validate(m);
  const double exact = static_cast<double>(m.layers) *
                           (4.0 * m.hidden * m.hidden + 3.0 * m.hidden * m.ffn + 2.0 * m.hidden) +
                       2.0 * m.vocabulary * m.hidden + m.hidden;
  EXPECT_GT(TotalParameters(m), 0);
  EXPECT_NEAR(static_cast<double>(TotalParameters(m)) / exact, 1.0, 1e-12);
}

TEST(ModelSpecTest, AKeyGivenTwiceIsRefused) {
  for (const char* text : {"llama3-8b,layers=2,layers=3", "llama3-8b,seq=8, seq =8",
                           "arch=gpt,layers=2,hidden=64,heads=4,ffn=256,seq=32,vocab=100,"
                           "global_batch=8,arch=llama"}) {
    absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.status().message().find("is given twice"), std::string::npos) << m.status();
  }
}

TEST(ModelSpecTest, APresetsKvHeadsAreSaidToBeItsDefault) {
  // The user wrote heads=1 only: the kv_heads refused are llama3-8b's 8.
  absl::StatusOr<ModelSpec> m = ParseModelSpec("llama3-8b,heads=1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "model: kv_heads (8, llama3-8b's default) must divide heads (1): give kv_heads too");
  // Written by the user, the plain message.
  m = ParseModelSpec("llama3-8b,heads=1,kv_heads=8");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "model: kv_heads (8) must divide heads (1)");
  EXPECT_TRUE(ParseModelSpec("llama3-8b,heads=1,kv_heads=1").ok());
  // A multi-head preset stays multi-head: GPT-3 1.3B's 16 kv_heads follow heads=4.
  m = ParseModelSpec("gpt3-1.3b,heads=4");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kv_heads, 4);
  m = ParseModelSpec("gpt3-1.3b,heads=4,kv_heads=2");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kv_heads, 2);
}

}  // namespace
}  // namespace commir::search::plan
