// A training step that draws dropout: every step draws a new mask (the step count is
// Philox's counter upper half, commir/philox.h), the forward and backward of one step
// draw the same one, and the partitioned step draws what one device draws.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "commir/philox.h"
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

constexpr uint64_t kSeed = 11;
constexpr double kRate = 0.5;

// loss = sum(dropout(w) * c): dloss/dw = mask * c / (1 - rate), so one SGD step with
// lr = 1 moves w exactly where the mask keeps it.
std::string Program(const std::string& mesh, const std::string& tp) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @f(%w: f32[8, 16TP], %c: f32[8, 16]) -> f32[] {
  %d = dropout(%w) {rate = 0.5, seed = 11}
  %p = mul(%d, %c)
  %loss = reduce_sum(%p) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", mesh}, {"TP", tp}});
}

std::unique_ptr<Module> StepModule(const std::string& text, bool adamw) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return nullptr;
  TrainingStepOptions options;
  options.params = {"w"};
  options.learning_rate = 1;
  if (adamw) options.adamw = AdamWHyperparameters{};
  absl::StatusOr<Function*> step = BuildTrainingStep(*module, *module->FindFunction("f"), options);
  EXPECT_TRUE(step.ok()) << step.status();
  if (!step.ok()) return nullptr;
  return module;
}

TEST(TrainingStepDropoutTest, SgdCountsItsStepsAndEveryDropoutReadsTheCount) {
  std::unique_ptr<Module> module = StepModule(Program("tp=1", ""), /*adamw=*/false);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(VerifyModule(*module).ok()) << PrintModule(*module);
  const std::string step = PrintFunction(*module->FindFunction("f_step"));
  EXPECT_THAT(step, HasSubstr("func @f_step(%w: f32[8, 16], %step: f32[], %c: f32[8, 16]) -> "
                              "(f32[], f32[8, 16], f32[])"))
      << step;
  EXPECT_THAT(step, HasSubstr("%dropout_step = convert(%step) : i64[]")) << step;
  // The forward's dropout and the backward's, both in this step.
  EXPECT_THAT(step, HasSubstr("dropout(%w, %dropout_step)")) << step;
  EXPECT_THAT(step, HasSubstr("%new_step = add(%step, 1.0)")) << step;
  const std::string init = PrintFunction(*module->FindFunction("f_step_init"));
  EXPECT_THAT(init, HasSubstr("func @f_step_init(%w: f32[8, 16]) -> f32[]")) << init;
}

TEST(TrainingStepDropoutTest, EachStepDrawsItsOwnMaskInForwardAndBackward) {
  std::unique_ptr<Module> module = StepModule(Program("tp=1", ""), /*adamw=*/false);
  ASSERT_NE(module, nullptr);
  const Function& step = *module->FindFunction("f_step");
  std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(step, 5);
  const std::vector<double> w = inputs[0].ToDouble();
  const std::vector<double> c = inputs[2].ToDouble();
  const uint64_t threshold = philox::DropoutThreshold(kRate);
  std::vector<std::vector<bool>> masks;
  for (int64_t s : {0, 1, 2}) {
    inputs[1] = runtime::Tensor::FromInt64(ElementType::kF32, {}, {s});
    absl::StatusOr<std::vector<runtime::Tensor>> out = testing::RunWithGlobalInputs(step, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 3u);
    EXPECT_EQ((*out)[2].ToDouble()[0], static_cast<double>(s + 1));  // the count moves on
    const std::vector<double> loss = (*out)[0].ToDouble();
    const std::vector<double> updated = (*out)[1].ToDouble();
    std::vector<bool> mask(w.size());
    double expected_loss = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      // The mask Philox gives element i in step s, closed form: the loss's and the
      // update's (dw = mask * c / (1 - rate), lr = 1) agree with it.
      mask[i] = philox::DropoutKeeps(kSeed, i, threshold, static_cast<uint64_t>(s));
      const double g = mask[i] ? c[i] / (1 - kRate) : 0.0;
      expected_loss += mask[i] ? w[i] / (1 - kRate) * c[i] : 0.0;
      EXPECT_NEAR(updated[i], w[i] - g, 1e-6) << "step " << s << " element " << i;
    }
    EXPECT_NEAR(loss[0], expected_loss, 1e-4) << "step " << s;
    masks.push_back(mask);
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
  // Step 0 draws what a dropout without a step draws (the forward program's mask).
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(masks[0][i], philox::DropoutKeeps(kSeed, i, threshold)) << i;
  }
}

TEST(TrainingStepDropoutTest, PartitionedStepDrawsWhatOneDeviceDraws) {
  for (bool adamw : {false, true}) {
    std::unique_ptr<Module> module = StepModule(Program("dp=2, tp=2", "@tp"), adamw);
    ASSERT_NE(module, nullptr);
    // The random inputs put the step count in [-1, 1): steps 0 and -1 (as i64).
    for (uint64_t seed : {1, 2}) {
      absl::StatusOr<testing::SpmdCheck> check =
          testing::CheckPartitioned(PrintModule(*module), "f_step", seed);
      ASSERT_TRUE(check.ok()) << check.status();
      EXPECT_TRUE(check->pass) << (adamw ? "adamw" : "sgd") << "\n" << check->report;
    }
  }
}

}  // namespace
}  // namespace commir
