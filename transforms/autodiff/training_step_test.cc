// The training-step pass: the step's signature, its update against the gradient function
// (p - lr * g), mixed precision, what it refuses, and the partitioned step on a mesh.
#include "transforms/autodiff/training_step.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

// A Megatron MLP with a mean-square loss against a target, and a second result the step
// does not return. The trained weights come first.
std::string Mlp(const std::string& mesh, const std::string& dp, const std::string& tp,
                const std::string& et = "f32") {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @mlp(%w1: ET[8, 16TP], %w2: ET[16TP, 8], %x: ET[8DP, 8], %t: f32[8DP, 8]) -> (f32[], ET[8DP, 8]) {
  %h = matmul(%x, %w1)
  %a = gelu(%h)
  %y = matmul(%a, %w2)
  %y32 = convert(%y) : f32[8DP, 8]
  %e = sub(%y32, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss, %y
}
)",
                             {{"MESH", mesh}, {"DP", dp}, {"TP", tp}, {"ET", et}});
}

TrainingStepOptions Sgd(double lr, std::vector<std::string> params = {"w1", "w2"}) {
  TrainingStepOptions options;
  options.params = std::move(params);
  options.learning_rate = lr;
  return options;
}

TEST(TrainingStepTest, ReturnsTheLossThenEachParamsNewValueWithItsLayout) {
  std::unique_ptr<Module> module = testing::ParseForTest(Mlp("dp=2, tp=2", "@dp", "@tp"));
  ASSERT_NE(module, nullptr);
  // Given out of order: the new params still follow the argument order.
  absl::StatusOr<Function*> step =
      BuildTrainingStep(*module, *module->FindFunction("mlp"), Sgd(0.1, {"w2", "w1"}));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ((*step)->name(), "mlp_step");
  EXPECT_EQ(module->FindFunction("mlp_grad"), nullptr);
  ASSERT_NE(module->FindFunction("mlp"), nullptr);
  const std::string text = PrintFunction(**step);
  EXPECT_THAT(text, HasSubstr("-> (f32[], f32[8, 16@tp], f32[16@tp, 8])")) << text;
  EXPECT_THAT(text, HasSubstr("return %loss, %new_w1, %new_w2")) << text;
  EXPECT_TRUE(VerifyModule(*module).ok()) << PrintModule(*module);
}

TEST(TrainingStepTest, UpdatesEachParamByMinusLearningRateTimesItsGradient) {
  const double lr = 0.25;
  std::unique_ptr<Module> module = testing::ParseForTest(Mlp("tp=1", "", ""));
  ASSERT_NE(module, nullptr);
  const Function& mlp = *module->FindFunction("mlp");
  ASSERT_TRUE(BuildTrainingStep(*module, mlp, Sgd(lr)).ok());
  AutodiffOptions ad;
  ad.wrt = {"w1", "w2"};
  absl::StatusOr<Function*> grad = Differentiate(*module, mlp, ad);
  ASSERT_TRUE(grad.ok()) << grad.status();

  const Function& step = *module->FindFunction("mlp_step");
  const std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(step, 7);
  absl::StatusOr<std::vector<runtime::Tensor>> stepped =
      testing::RunWithGlobalInputs(step, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> grads =
      testing::RunWithGlobalInputs(**grad, inputs);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(stepped->size(), 3u);
  EXPECT_EQ((*stepped)[0].ToDouble(), (*grads)[0].ToDouble());  // the same loss
  for (int p = 0; p < 2; ++p) {
    std::vector<double> param = inputs[p].ToDouble();
    std::vector<double> g = (*grads)[2 + p].ToDouble();  // after the loss and %y
    std::vector<double> updated = (*stepped)[1 + p].ToDouble();
    ASSERT_EQ(updated.size(), param.size());
    double moved = 0;
    for (size_t i = 0; i < param.size(); ++i) {
      EXPECT_NEAR(updated[i], param[i] - lr * g[i], 1e-6) << "param " << p << " element " << i;
      moved += std::abs(updated[i] - param[i]);
    }
    EXPECT_GT(moved, 0) << "param " << p << " did not move";
  }
}

TEST(TrainingStepTest, Bf16ParamsGetAnF32UpdateRoundedBack) {
  std::unique_ptr<Module> module = testing::ParseForTest(Mlp("tp=1", "", "", "bf16"));
  ASSERT_NE(module, nullptr);
  TrainingStepOptions options = Sgd(0.1);
  options.grad_type = ElementType::kF32;
  absl::StatusOr<Function*> step =
      BuildTrainingStep(*module, *module->FindFunction("mlp"), options);
  ASSERT_TRUE(step.ok()) << step.status();
  const std::string text = PrintFunction(**step);
  EXPECT_THAT(text, HasSubstr("-> (f32[], bf16[8, 16], bf16[16, 8])")) << text;
  // The update runs in f32: the param widened, the f32 gradient scaled, the difference
  // rounded to bf16.
  EXPECT_THAT(text, HasSubstr("convert(%w1) : f32[8, 16]")) << text;
  EXPECT_THAT(text, HasSubstr("%new_w1 = convert(")) << text;
  EXPECT_TRUE(VerifyModule(*module).ok()) << PrintModule(*module);
}

std::string Refusal(const std::string& text, const TrainingStepOptions& options) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return "did not parse";
  DiagnosticEngine diagnostics;
  absl::StatusOr<Function*> step =
      BuildTrainingStep(*module, *module->functions().front(), options, &diagnostics);
  if (step.ok()) return "accepted";
  EXPECT_FALSE(diagnostics.Sorted().empty()) << "no located error for " << step.status();
  return std::string(step.status().message());
}

TEST(TrainingStepRefusesTest, NoParams) {
  EXPECT_THAT(Refusal(Mlp("tp=1", "", ""), Sgd(0.1, {})), HasSubstr("params=\"w1,w2\""));
}

TEST(TrainingStepRefusesTest, AParamThatIsNoArgument) {
  EXPECT_THAT(Refusal(Mlp("tp=1", "", ""), Sgd(0.1, {"w1", "w3"})),
              HasSubstr("params names %w3, which @mlp has no argument of"));
}

TEST(TrainingStepRefusesTest, AParamNamedTwice) {
  EXPECT_THAT(Refusal(Mlp("tp=1", "", ""), Sgd(0.1, {"w1", "w1"})),
              HasSubstr("params names %w1 twice"));
}

TEST(TrainingStepRefusesTest, ANonFiniteLearningRate) {
  EXPECT_THAT(Refusal(Mlp("tp=1", "", ""), Sgd(std::nan(""))), HasSubstr("finite"));
}

TEST(TrainingStepRefusesTest, ALossThatIsNotAScalar) {
  EXPECT_THAT(Refusal(R"(func @f(%w: f32[4], %x: f32[4]) -> f32[4] {
  %y = mul(%w, %x)
  return %y
})",
                      Sgd(0.1, {"w"})),
              HasSubstr("must be a float scalar (the loss)"));
}

TEST(TrainingStepRefusesTest, AnExistingStepFunction) {
  EXPECT_THAT(Refusal(R"(func @f(%w: f32[4]) -> f32[] {
  %loss = reduce_sum(%w) {dims = [0]}
  return %loss
}
func @f_step(%w: f32[4]) -> f32[] {
  %loss = reduce_sum(%w) {dims = [0]}
  return %loss
})",
                      Sgd(0.1, {"w"})),
              HasSubstr("@f_step exists already"));
}

// The step is a global function like any other: partitioned on 2x2 and 2x4 meshes (data
// parallel batch, tensor parallel weights) it computes the single-device step.
TEST(TrainingStepOnMeshTest, PartitionedStepMatchesOneDevice) {
  for (const std::string mesh : {"dp=2, tp=2", "dp=2, tp=4"}) {
    std::unique_ptr<Module> module = testing::ParseForTest(Mlp(mesh, "@dp", "@tp"));
    ASSERT_NE(module, nullptr);
    ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("mlp"), Sgd(0.5)).ok());
    absl::StatusOr<testing::SpmdCheck> check =
        testing::CheckPartitioned(PrintModule(*module), "mlp_step", /*seed=*/3);
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << mesh << "\n" << check->report << "\n" << check->lowered;
    // Data-parallel weight gradients are summed over dp before the update.
    EXPECT_THAT(check->lowered, HasSubstr("{axis = dp}")) << check->lowered;
  }
}

}  // namespace
}  // namespace commir
