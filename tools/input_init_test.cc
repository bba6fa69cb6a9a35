#include "tools/input_init.h"

#include <cmath>
#include <memory>
#include <vector>

#include "commir/diagnostics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir {
namespace {

using runtime::InitRule;

std::vector<InitRule> Rules(const char* text, InitScheme scheme) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(text, diagnostics);
  EXPECT_NE(module, nullptr) << diagnostics.Render("test", text);
  if (module == nullptr) return {};
  return InitRulesFor(*module->functions()[0], scheme);
}

TEST(InitRules, UniformLeavesEveryArgumentUniform) {
  for (const InitRule& rule : Rules(R"(func @f(%x: f32[2, 8], %w: f32[8, 4]) -> f32[2, 4] {
  %y = matmul(%x, %w) : f32[2, 4]
  return %y
})",
                                    InitScheme::kUniform)) {
    EXPECT_EQ(rule.kind, InitRule::Kind::kUniform);
  }
}

TEST(InitRules, ScaledFollowsRoles) {
  std::vector<InitRule> rules = Rules(
      R"(func @f(%x: f32[2, 8], %w: f32[8, 4], %wt: f32[6, 4], %b: f32[4], %g: f32[4], %s: f32[4]) -> f32[2, 6] {
  %h = matmul(%x, %w) : f32[2, 4]
  %hb = add(%h, %b)
  %n = rmsnorm(%hb, %g)
  %m = mul(%n, %s)
  %y = matmul(%m, %wt) {transpose_b} : f32[2, 6]
  return %y
})",
      InitScheme::kScaled);
  ASSERT_EQ(rules.size(), 6u);
  EXPECT_EQ(rules[0].kind, InitRule::Kind::kUniform);  // an activation
  EXPECT_EQ(rules[1].kind, InitRule::Kind::kScaledUniform);
  EXPECT_DOUBLE_EQ(rules[1].value, std::sqrt(3.0 / 8));  // fan-in 8: variance 1/8
  EXPECT_EQ(rules[2].kind, InitRule::Kind::kScaledUniform);
  EXPECT_DOUBLE_EQ(rules[2].value, std::sqrt(3.0 / 4));  // transposed: [N, K], fan-in 4
  EXPECT_EQ(rules[3].kind, InitRule::Kind::kConstant);   // bias of a matmul's product
  EXPECT_EQ(rules[3].value, 0.0);
  EXPECT_EQ(rules[4].kind, InitRule::Kind::kConstant);   // norm weight
  EXPECT_EQ(rules[4].value, 1.0);
  EXPECT_EQ(rules[5].kind, InitRule::Kind::kUniform);    // used otherwise
}

// In a spmd function the weight's role is found through the all_gather, and its fan-in
// is the global one, so the values match the global program's.
TEST(InitRules, SpmdWeightsUseTheGlobalFanIn) {
  std::vector<InitRule> rules = Rules(R"(mesh @m(tp=2)
spmd func @f(%x: f32[4, 8], %w: f32[8@tp, 4]) -> f32[4, 4] on @m {
  %wg = all_gather(%w) {axis = tp, dim = 0} : f32[8, 4]
  %y = matmul(%x, %wg) : f32[4, 4]
  return %y
})",
                                      InitScheme::kScaled);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[1].kind, InitRule::Kind::kScaledUniform);
  EXPECT_DOUBLE_EQ(rules[1].value, std::sqrt(3.0 / 8));
}

TEST(InitRules, UnknownSchemeListsTheValidOnes) {
  EXPECT_TRUE(ParseInitScheme("uniform").ok());
  EXPECT_TRUE(ParseInitScheme("scaled").ok());
  EXPECT_EQ(ParseInitScheme("xavier").status().message(),
            "--init must be one of uniform, scaled; got 'xavier'");
}

}  // namespace
}  // namespace commir
