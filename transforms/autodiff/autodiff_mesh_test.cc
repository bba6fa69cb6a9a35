// Gradient functions are global functions like any other: the partitioner lowers them,
// and on 2, 4 and 8-device meshes they compute the single-device gradient.
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

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

// Causal GQA attention with its projections: data-parallel batch, tensor-parallel heads
// (4 query heads over 2 kv heads), so attention_grad runs on each device's heads.
std::string AttentionLayer(const MeshCase& m) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @attn(%x: f32[2DP, 8, 16], %wq: f32[16, 16TP], %wk: f32[16, 8TP], %wv: f32[16, 8TP]) -> f32[] {
  %q = matmul(%x, %wq)
  %k = matmul(%x, %wk)
  %v = matmul(%x, %wv)
  %q4 = reshape(%q) : f32[2, 8, 4, 4]
  %k4 = reshape(%k) : f32[2, 8, 2, 4]
  %v4 = reshape(%v) : f32[2, 8, 2, 4]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}
  %o = attention(%qh, %kh, %vh) {causal}
  %sq = mul(%o, %o)
  %loss = reduce_mean(%sq) {dims = [0, 1, 2, 3]}
  return %loss
}
)",
                             {{"MESH", m.mesh}, {"DP", m.dp}, {"TP", m.tp}});
}

// The attention layer with a z-loss on attention's lse added to the loss, so the gradient
// also flows through lse (attention_grad's extra column).
std::string AttentionLayerWithLseLoss(const MeshCase& m) {
  return absl::StrReplaceAll(
      AttentionLayer(m),
      {{"  %o = attention(%qh, %kh, %vh) {causal}", "  %o, %lse = attention(%qh, %kh, %vh) {causal}"},
       {"  %loss = reduce_mean(%sq) {dims = [0, 1, 2, 3]}",
        "  %ol = reduce_mean(%sq) {dims = [0, 1, 2, 3]}\n  %z = mul(%lse, %lse)\n"
        "  %zl = reduce_mean(%z) {dims = [0, 1, 2]}\n  %loss = add(%ol, %zl)"}});
}

// The MLP with bf16 activations and weights and an f32 loss, differentiated with f32
// gradients (grad-type=f32).
std::string MlpBf16(const MeshCase& m) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @mlp(%x: bf16[32DP, 16], %w1: bf16[16, 64TP], %w2: bf16[64TP, 16]) -> f32[] {
  %h = matmul(%x, %w1)
  %a = gelu(%h)
  %y = matmul(%a, %w2)
  %y32 = convert(%y) : f32[32, 16]
  %sq = mul(%y32, %y32)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", m.mesh}, {"DP", m.dp}, {"TP", m.tp}});
}

class GradientOnMeshTest : public ::testing::TestWithParam<MeshCase> {};

void PrintTo(const MeshCase& m, std::ostream* os) { *os << m.mesh; }

void ExpectGradientPartitions(const std::string& text, const std::string& function) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<Function*> grad =
      Differentiate(*module, *module->FindFunction(function), AutodiffOptions{});
  ASSERT_TRUE(grad.ok()) << grad.status();
  const std::string with_grad = PrintModule(*module);
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckPartitioned(with_grad, function + "_grad", /*seed=*/5);
  ASSERT_TRUE(check.ok()) << check.status() << "\n" << with_grad;
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
}

TEST_P(GradientOnMeshTest, MlpGradientMatchesOneDevice) {
  ExpectGradientPartitions(Mlp(GetParam()), "mlp");
}

TEST_P(GradientOnMeshTest, PreNormBlockGradientMatchesOneDevice) {
  ExpectGradientPartitions(PreNormBlock(GetParam()), "block");
}

TEST_P(GradientOnMeshTest, AttentionLayerGradientMatchesOneDevice) {
  ExpectGradientPartitions(AttentionLayer(GetParam()), "attn");
}

TEST_P(GradientOnMeshTest, AttentionLayerWithLseLossGradientMatchesOneDevice) {
  ExpectGradientPartitions(AttentionLayerWithLseLoss(GetParam()), "attn");
}

// A bf16 forward rounds its partial sums at other points once partitioned, so the
// gradients agree to bf16's precision (rel_l2 under 1e-2), not f32's.
TEST_P(GradientOnMeshTest, Bf16MlpWithF32GradientsMatchesOneDevice) {
  AutodiffOptions options;
  options.grad_type = ElementType::kF32;
  std::unique_ptr<Module> reference = testing::ParseForTest(MlpBf16(GetParam()));
  std::unique_ptr<Module> lowered = testing::ParseForTest(MlpBf16(GetParam()));
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(lowered, nullptr);
  ASSERT_TRUE(Differentiate(*reference, *reference->FindFunction("mlp"), options).ok());
  ASSERT_TRUE(Differentiate(*lowered, *lowered->FindFunction("mlp"), options).ok());
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok());
  const Function& one = *reference->FindFunction("mlp_grad");
  const Function& many = *lowered->FindFunction("mlp_grad");
  ASSERT_TRUE(many.is_spmd());
  const std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(one, 11);
  absl::StatusOr<std::vector<runtime::Tensor>> want = testing::RunWithGlobalInputs(one, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> got = testing::RunWithGlobalInputs(many, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  for (size_t r = 0; r < got->size(); ++r) {
    EXPECT_EQ((*got)[r].element_type(), ElementType::kF32);
    std::vector<double> g = (*got)[r].ToDouble();
    std::vector<double> w = (*want)[r].ToDouble();
    double num = 0, den = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      num += (g[i] - w[i]) * (g[i] - w[i]);
      den += w[i] * w[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-2) << "result " << r << "\n" << PrintFunction(many);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, GradientOnMeshTest,
    ::testing::Values(MeshCase{"tp=2", "", "@tp"}, MeshCase{"dp=2, tp=2", "@dp", "@tp"},
                      MeshCase{"dp=2, tp=4", "@dp", "@tp"}),
    [](const ::testing::TestParamInfo<MeshCase>& info) {
      return absl::StrCat("devices", info.index == 0 ? 2 : info.index == 1 ? 4 : 8);
    });

}  // namespace
}  // namespace commir

namespace commir {
namespace {

// The shared examples' gradient functions (vector-Jacobian products: they return tensors)
// on their own meshes, with the layouts written on them, against one device.
class SharedExampleGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedExampleGradientTest, PartitionedGradientMatchesOneDevice) {
  std::ifstream in("testdata/examples/" + GetParam() + ".commir");
  ASSERT_TRUE(in) << GetParam();
  std::stringstream text;
  text << in.rdbuf();
  std::unique_ptr<Module> module = testing::ParseForTest(text.str());
  ASSERT_NE(module, nullptr);
  const std::string function = module->functions().front()->name();
  AutodiffOptions options;
  options.seed_cotangents = true;
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction(function), options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckPartitioned(PrintModule(*module), function + "_grad", /*seed=*/3);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
}

INSTANTIATE_TEST_SUITE_P(Examples, SharedExampleGradientTest,
                         ::testing::Values("mlp", "transformer_block", "attention",
                                           "ag_matmul_global4"));

}  // namespace
}  // namespace commir
