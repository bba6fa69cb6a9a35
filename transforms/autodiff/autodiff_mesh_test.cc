// Gradient functions are global functions like any other: the partitioner lowers them,
// and on 2, 4 and 8-device meshes they compute the single-device gradient.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"
#include "testing/spmd_check.h"

namespace commir {
namespace {

struct MeshCase {
  std::string mesh;  // "dp=2, tp=4"
  std::string dp;    // the data axis as written in a type ("" for none)
  std::string tp;
};

// The shared Megatron MLP (sequence-parallel activations, tensor-parallel weights) with
// the mean square of its output as the loss.
std::string Mlp(const MeshCase& m) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @mlp(%x: f32[32TP, 16], %w1: f32[16, 64TP], %w2: f32[64TP, 16]) -> (f32[], f32[32TP, 16]) {
  %h = matmul(%x, %w1) : f32[32, 64TP]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[32TP, 16]
  %sq = mul(%y, %y)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss, %y
}
)",
                             {{"MESH", m.mesh}, {"TP", m.tp}});
}

// A pre-norm block without attention: data-parallel tokens, tensor-parallel MLP.
std::string PreNormBlock(const MeshCase& m) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @block(%x: f32[16DP, 32], %g: f32[32], %w1: f32[32, 64TP], %w2: f32[64TP, 32]) -> f32[] {
  %n = rmsnorm(%x, %g)
  %h = matmul(%n, %w1)
  %a = silu(%h)
  %o = matmul(%a, %w2)
  %y = add(%x, %o)
  %s = softmax(%y)
  %sq = mul(%s, %y)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", m.mesh}, {"DP", m.dp}, {"TP", m.tp}});
}

class GradientOnMeshTest : public ::testing::TestWithParam<MeshCase> {};

void ExpectGradientPartitions(const std::string& text, const std::string& function) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<Function*> grad =
      Differentiate(*module, *module->FindFunction(function), AutodiffOptions{});
  ASSERT_TRUE(grad.ok()) << grad.status();
  const std::string with_grad = PrintModule(*module);
  absl::StatusOr<sharding::SpmdCheck> check =
      sharding::CheckPartitioned(with_grad, function + "_grad", /*seed=*/5);
  ASSERT_TRUE(check.ok()) << check.status() << "\n" << with_grad;
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
}

TEST_P(GradientOnMeshTest, MlpGradientMatchesOneDevice) { ExpectGradientPartitions(Mlp(GetParam()), "mlp"); }

TEST_P(GradientOnMeshTest, PreNormBlockGradientMatchesOneDevice) {
  ExpectGradientPartitions(PreNormBlock(GetParam()), "block");
}

INSTANTIATE_TEST_SUITE_P(Meshes, GradientOnMeshTest,
                         ::testing::Values(MeshCase{"tp=2", "", "@tp"},
                                           MeshCase{"dp=2, tp=2", "@dp", "@tp"},
                                           MeshCase{"dp=2, tp=4", "@dp", "@tp"}),
                         [](const ::testing::TestParamInfo<MeshCase>& info) {
                           return absl::StrCat("devices", info.index == 0 ? 2 : info.index == 1 ? 4 : 8);
                         });

}  // namespace
}  // namespace commir
