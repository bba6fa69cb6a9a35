// training-step with AdamW and gradient clipping: the update against closed forms of a
// loss whose gradient is known (loss = sum(w * x), so dloss/dw = x), the state layout
// (moments, step count, f32 masters of bf16 params) and @f_step_init, and the step
// partitioned on 1, 2 and 2x2 meshes against one device over several fed-back steps.
// tools/adamw_torch_test.sh checks the same steps against torch.optim.AdamW itself.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/training_step.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::HasSubstr;
using runtime::Tensor;

// loss = sum(w1 * x1) + sum(w2 * x2): each gradient is its x.
constexpr char kLinear[] = R"(func @f(%w1: ET[2, 3], %w2: ET[4], %x1: f32[2, 3], %x2: f32[4]) -> f32[] {
  %a = convert(%w1) : f32[2, 3]
  %b = convert(%w2) : f32[4]
  %p1 = mul(%a, %x1)
  %p2 = mul(%b, %x2)
  %s1 = reduce_sum(%p1) {dims = [0, 1]}
  %s2 = reduce_sum(%p2) {dims = [0]}
  %loss = add(%s1, %s2)
  return %loss
}
)";

std::string Linear(const std::string& et) { return absl::StrReplaceAll(kLinear, {{"ET", et}}); }

TrainingStepOptions AdamW(const AdamWHyperparameters& h) {
  TrainingStepOptions options;
  options.params = {"w1", "w2"};
  options.adamw = h;
  return options;
}

// The step function's inputs: random params and batch from `seed`, the state from
// @<step>_init run on the params (the state arguments follow the params).
std::vector<Tensor> FirstInputs(const Module& module, const std::string& step_name, uint64_t seed) {
  const Function& step = *module.FindFunction(step_name);
  const Function& init = *module.FindFunction(step_name + "_init");
  std::vector<Tensor> inputs = testing::RandomGlobalInputs(step, seed);
  const size_t num_params = init.arg_types().size();
  std::vector<Tensor> params(inputs.begin(), inputs.begin() + num_params);
  absl::StatusOr<std::vector<Tensor>> state = testing::RunWithGlobalInputs(init, params);
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok()) return inputs;
  for (size_t k = 0; k < state->size(); ++k) inputs[num_params + k] = (*state)[k];
  return inputs;
}

// Runs `steps` steps of `step`, feeding results 1.. back into arguments 0.., and returns
// the last step's results.
std::vector<Tensor> RunSteps(const Function& step, std::vector<Tensor> inputs, int steps) {
  std::vector<Tensor> results;
  for (int s = 0; s < steps; ++s) {
    absl::StatusOr<std::vector<Tensor>> out = testing::RunWithGlobalInputs(step, inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    results = *std::move(out);
    for (size_t i = 1; i < results.size(); ++i) inputs[i - 1] = results[i];
  }
  return results;
}

TEST(AdamWStepTest, StateFollowsTheParamsAndInitGivesZeroMomentsAndMasters) {
  std::unique_ptr<Module> module = testing::ParseForTest(Linear("bf16"));
  ASSERT_NE(module, nullptr);
  absl::StatusOr<Function*> step = BuildTrainingStep(*module, *module->FindFunction("f"),
                                                     AdamW(AdamWHyperparameters{}));
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_TRUE(VerifyModule(*module).ok()) << PrintModule(*module);
  const std::string text = PrintFunction(**step);
  EXPECT_THAT(text, HasSubstr("func @f_step(%w1: bf16[2, 3], %w2: bf16[4], %w1_master: f32[2, 3], "
                              "%w2_master: f32[4], %w1_m: f32[2, 3], %w2_m: f32[4], %w1_v: "
                              "f32[2, 3], %w2_v: f32[4], %step: f32[], %x1: f32[2, 3], %x2: "
                              "f32[4]) -> (f32[], bf16[2, 3], bf16[4], f32[2, 3], f32[4], f32[2, "
                              "3], f32[4], f32[2, 3], f32[4], f32[])"))
      << text;
  const Function* init = module->FindFunction("f_step_init");
  ASSERT_NE(init, nullptr);
  std::vector<Tensor> inputs = FirstInputs(*module, "f_step", 5);
  // Masters are the bf16 params widened exactly; moments and the count are zero.
  EXPECT_EQ(inputs[2].ToDouble(), inputs[0].ToDouble());
  EXPECT_EQ(inputs[3].ToDouble(), inputs[1].ToDouble());
  for (int k = 4; k <= 8; ++k) {
    for (double v : inputs[k].ToDouble()) EXPECT_EQ(v, 0) << "state argument " << k;
  }
}

// AdamW by hand in double, torch.optim.AdamW's formulas for one element.
struct Element {
  double w, m = 0, v = 0;
};
void AdamWByHand(Element& e, double g, int t, const AdamWHyperparameters& h) {
  e.w *= 1 - h.lr * h.weight_decay;
  e.m = h.beta1 * e.m + (1 - h.beta1) * g;
  e.v = h.beta2 * e.v + (1 - h.beta2) * g * g;
  const double step_size = h.lr / (1 - std::pow(h.beta1, t));
  const double denominator = std::sqrt(e.v) / std::sqrt(1 - std::pow(h.beta2, t)) + h.eps;
  e.w -= step_size * e.m / denominator;
}

TEST(AdamWStepTest, ThreeStepsOfAConstantGradientMatchTheClosedForm) {
  AdamWHyperparameters h;
  h.lr = 0.05;
  h.beta1 = 0.8;
  h.beta2 = 0.95;
  h.eps = 1e-3;  // large enough to matter
  h.weight_decay = 0.5;
  std::unique_ptr<Module> module = testing::ParseForTest(Linear("f32"));
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("f"), AdamW(h)).ok());
  const std::vector<Tensor> inputs = FirstInputs(*module, "f_step", 11);
  // f32 params have no master: (w1, w2, m1, m2, v1, v2, step, x1, x2).
  const std::vector<Tensor> results = RunSteps(*module->FindFunction("f_step"), inputs, 3);
  ASSERT_EQ(results.size(), 8u);
  EXPECT_EQ(results[7].ToDouble(), std::vector<double>{3});  // the step count
  for (int p = 0; p < 2; ++p) {
    const std::vector<double> w = inputs[p].ToDouble();
    const std::vector<double> x = inputs[7 + p].ToDouble();
    const std::vector<double> new_w = results[1 + p].ToDouble();
    const std::vector<double> new_m = results[3 + p].ToDouble();
    const std::vector<double> new_v = results[5 + p].ToDouble();
    for (size_t i = 0; i < w.size(); ++i) {
      Element e{w[i]};
      for (int t = 1; t <= 3; ++t) AdamWByHand(e, x[i], t, h);
      EXPECT_NEAR(new_w[i], e.w, 1e-6) << "param " << p << " element " << i;
      EXPECT_NEAR(new_m[i], e.m, 1e-6);
      EXPECT_NEAR(new_v[i], e.v, 1e-6);
    }
  }
}

TEST(AdamWStepTest, Bf16ParamsAreTheirF32MastersRounded) {
  AdamWHyperparameters h;
  h.lr = 1e-3;  // far below one bf16 ulp of the weights: only the master moves
  std::unique_ptr<Module> module = testing::ParseForTest(Linear("bf16"));
  ASSERT_NE(module, nullptr);
  TrainingStepOptions options = AdamW(h);
  options.grad_type = ElementType::kF32;  // the gradient x unrounded
  ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("f"), options).ok());
  const std::vector<Tensor> inputs = FirstInputs(*module, "f_step", 2);
  const std::vector<Tensor> results = RunSteps(*module->FindFunction("f_step"), inputs, 2);
  ASSERT_EQ(results.size(), 10u);
  for (int p = 0; p < 2; ++p) {
    const std::vector<double> w = inputs[p].ToDouble();
    const std::vector<double> x = inputs[9 + p].ToDouble();
    const std::vector<double> master = results[3 + p].ToDouble();
    const std::vector<double> param = results[1 + p].ToDouble();
    for (size_t i = 0; i < w.size(); ++i) {
      Element e{w[i]};
      for (int t = 1; t <= 2; ++t) AdamWByHand(e, x[i], t, h);
      EXPECT_NEAR(master[i], e.w, 1e-6) << "param " << p << " element " << i;
      // The bf16 param is the master rounded to bf16 (8 significant bits).
      EXPECT_NEAR(param[i], master[i], std::abs(master[i]) * std::ldexp(1.0, -8))
          << "param " << p << " element " << i;
    }
  }
}

// clip_grad_norm_'s closed form with SGD: every gradient x times
// min(1, C / (||(x1, x2)||_2 + 1e-6)).
TEST(ClipGradNormTest, ScalesEveryGradientByTheGlobalNormAsTorchDoes) {
  for (double max_norm : {0.5, 1e3}) {  // clipping and not
    std::unique_ptr<Module> module = testing::ParseForTest(Linear("f32"));
    ASSERT_NE(module, nullptr);
    TrainingStepOptions options;
    options.params = {"w1", "w2"};
    options.learning_rate = 0.1;
    options.clip_grad_norm = max_norm;
    ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("f"), options).ok());
    const Function& step = *module->FindFunction("f_step");
    const std::vector<Tensor> inputs = testing::RandomGlobalInputs(step, 9);
    absl::StatusOr<std::vector<Tensor>> results = testing::RunWithGlobalInputs(step, inputs);
    ASSERT_TRUE(results.ok()) << results.status();
    double squares = 0;
    for (int p = 0; p < 2; ++p) {
      for (double x : inputs[2 + p].ToDouble()) squares += x * x;
    }
    const double scale = std::min(1.0, max_norm / (std::sqrt(squares) + 1e-6));
    EXPECT_EQ(scale == 1.0, max_norm > 100);
    for (int p = 0; p < 2; ++p) {
      const std::vector<double> w = inputs[p].ToDouble();
      const std::vector<double> x = inputs[2 + p].ToDouble();
      const std::vector<double> new_w = (*results)[1 + p].ToDouble();
      for (size_t i = 0; i < w.size(); ++i) {
        EXPECT_NEAR(new_w[i], w[i] - 0.1 * scale * x[i], 1e-6) << max_norm;
      }
    }
  }
}

// A Megatron MLP with a replicated bias, a mean-square loss, AdamW and clipping: on 1, 2
// and 2x2 meshes the partitioned step, run for three fed-back steps, computes what the
// one-device step does.
std::string Mlp(const std::string& mesh, const std::string& dp, const std::string& tp) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @mlp(%w1: f32[8, 16TP], %w2: f32[16TP, 8], %b: f32[8], %x: f32[8DP, 8], %t: f32[8DP, 8]) -> f32[] {
  %h = matmul(%x, %w1)
  %a = tanh(%h)
  %y = matmul(%a, %w2)
  %yb = add(%y, %b)
  %e = sub(%yb, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", mesh}, {"DP", dp}, {"TP", tp}});
}

TEST(AdamWStepOnMeshTest, PartitionedStepsMatchOneDevice) {
  struct Case {
    std::string mesh, dp, tp;
  };
  for (const Case& c : {Case{"tp=1", "", "@tp"}, Case{"tp=2", "", "@tp"},
                        Case{"dp=2, tp=2", "@dp", "@tp"}}) {
    std::unique_ptr<Module> module = testing::ParseForTest(Mlp(c.mesh, c.dp, c.tp));
    ASSERT_NE(module, nullptr);
    TrainingStepOptions options;
    options.params = {"w1", "w2", "b"};
    options.adamw = AdamWHyperparameters{};
    options.adamw->lr = 0.01;
    options.clip_grad_norm = 0.25;  // below the norm: the clipping matters
    ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("mlp"), options).ok());
    const std::vector<Tensor> inputs = FirstInputs(*module, "mlp_step", 4);
    const std::vector<Tensor> expected = RunSteps(*module->FindFunction("mlp_step"), inputs, 3);

    std::unique_ptr<Module> lowered = module->Clone();
    ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok()) << c.mesh;
    const Function& spmd_step = *lowered->FindFunction("mlp_step");
    ASSERT_TRUE(spmd_step.is_spmd());
    const std::vector<Tensor> actual = RunSteps(spmd_step, inputs, 3);
    std::string report;
    EXPECT_TRUE(testing::CompareResults(actual, expected, &report))
        << c.mesh << "\n" << report << "\n" << PrintFunction(spmd_step);
    // The moments of a split weight stay split like it.
    EXPECT_THAT(PrintFunction(*module->FindFunction("mlp_step")),
                HasSubstr("%w1_m: f32[8, 16@tp]"));
  }
}

// The scalar all_reduces of `function` (the loss's, and with clipping the global norm's).
int ScalarAllReduces(const Function& function) {
  int count = 0;
  for (const Operation* op : *function.body()) {
    if (op->kind() == OpKind::kAllReduce && op->result(0)->type().rank() == 0) ++count;
  }
  return count;
}

// The demo's pre-norm block on 2x4 (dp x tp, Megatron weights, replicated norm gains):
// clipping adds exactly one all_reduce, of the sum of every shard's squared gradients,
// and the partitioned AdamW steps with clipping compute the one-device steps.
TEST(AdamWStepOnMeshTest, TheGlobalNormIsOneAllReduceOnABlock) {
  std::ifstream in("testdata/training/block_train.commir");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  int scalar_all_reduces[2] = {0, 0};
  for (bool clip : {false, true}) {
    std::unique_ptr<Module> module = testing::ParseForTest(text.str());
    ASSERT_NE(module, nullptr);
    TrainingStepOptions options;
    options.params = {"win", "g1", "wq", "wk", "wv", "wo", "g2", "w1", "w2"};
    options.adamw = AdamWHyperparameters{};
    options.adamw->lr = 0.01;
    if (clip) options.clip_grad_norm = 0.05;  // below the norm: the clipping matters
    ASSERT_TRUE(BuildTrainingStep(*module, *module->FindFunction("block"), options).ok());
    // Partitioned alone: the default pipeline's combine-all-reduces would put the norm's
    // all_reduce in a bucket with the loss's.
    std::unique_ptr<Module> lowered = module->Clone();
    ASSERT_TRUE(testing::RunPartitionPipeline(*lowered).ok());
    const Function& spmd_step = *lowered->FindFunction("block_step");
    scalar_all_reduces[clip] = ScalarAllReduces(spmd_step);
    if (!clip) continue;
    const std::vector<Tensor> inputs = FirstInputs(*module, "block_step", 6);
    const std::vector<Tensor> expected = RunSteps(*module->FindFunction("block_step"), inputs, 2);
    const std::vector<Tensor> actual = RunSteps(spmd_step, inputs, 2);
    std::string report;
    EXPECT_TRUE(testing::CompareResults(actual, expected, &report)) << report;
  }
  EXPECT_EQ(scalar_all_reduces[1], scalar_all_reduces[0] + 1);
}

}  // namespace
}  // namespace commir
