// training-step's typed options through the option schema: the `optimizer` choice with
// adamw's own typed, range-checked hyperparameters and the `clip_grad_norm` number, as
// text (parsed, with the parser's errors) and as a typed step (its text form parses back
// to the same values), and --list-passes' rows for them.
#include <memory>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/autodiff/training_step.h"
#include "transforms/pipeline.h"
#include "transforms/registry/pass_registry.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

// The options the pipeline text gives training-step, or the parse error.
absl::StatusOr<TrainingStepPassOptions> Parse(const std::string& text) {
  absl::StatusOr<Pipeline> pipeline = ParsePipeline(text, RegisteredPasses());
  if (!pipeline.ok()) return pipeline.status();
  EXPECT_EQ(pipeline->steps.size(), 1u);
  std::unique_ptr<Pass> pass = pipeline->steps[0].Create();
  return static_cast<TrainingStepPass&>(*pass).options();
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<TrainingStepPassOptions> options = Parse(text);
  if (options.ok()) return "accepted";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << options.status();
  return std::string(options.status().message());
}

TEST(TrainingStepOptionsTest, SgdIsTheDefault) {
  absl::StatusOr<TrainingStepPassOptions> options = Parse("training-step{params=w}");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(std::holds_alternative<SgdOptimizerOption>(options->optimizer));
  EXPECT_EQ(options->clip_grad_norm, 0);
}

TEST(TrainingStepOptionsTest, AdamWHyperparametersAreReadTypedWithTorchsDefaultsForTheRest) {
  absl::StatusOr<TrainingStepPassOptions> options = Parse(
      "training-step{params=\"w1,w2\", optimizer = adamw{ lr=2e-4, beta2=0.95, "
      "weight_decay=\"0.1\" }, clip_grad_norm=1.5}");
  ASSERT_TRUE(options.ok()) << options.status();
  const auto* adamw = std::get_if<AdamWOptimizerOption>(&options->optimizer);
  ASSERT_NE(adamw, nullptr);
  EXPECT_EQ(adamw->lr, 2e-4);
  EXPECT_EQ(adamw->beta1, 0.9);  // torch.optim.AdamW's defaults
  EXPECT_EQ(adamw->beta2, 0.95);
  EXPECT_EQ(adamw->eps, 1e-8);
  EXPECT_EQ(adamw->weight_decay, 0.1);
  EXPECT_EQ(options->clip_grad_norm, 1.5);
  // A bare `adamw` is all defaults.
  options = Parse("training-step{params=w,optimizer=adamw}");
  ASSERT_TRUE(options.ok()) << options.status();
  adamw = std::get_if<AdamWOptimizerOption>(&options->optimizer);
  ASSERT_NE(adamw, nullptr);
  EXPECT_EQ(adamw->lr, 1e-3);
  EXPECT_EQ(adamw->weight_decay, 1e-2);
}

TEST(TrainingStepOptionsTest, TypedStepsTextFormParsesBackToTheSameValues) {
  TrainingStepPassOptions options;
  options.params = "w";
  AdamWOptimizerOption adamw;
  adamw.lr = 3e-4;
  adamw.eps = 1e-6;
  options.optimizer = adamw;
  options.clip_grad_norm = 0.1;
  const PassStep step = PassStep::Of<TrainingStepPass>(options);
  // Only what differs from the defaults, inside the choice too; numbers in the shortest
  // text that reads back as the same double.
  EXPECT_EQ(step.ToString(),
            "training-step{params=w,optimizer=adamw{lr=0.0003,eps=1e-06},clip_grad_norm=0.1}");
  absl::StatusOr<TrainingStepPassOptions> back = Parse(step.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  const auto* parsed = std::get_if<AdamWOptimizerOption>(&back->optimizer);
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->lr, 3e-4);
  EXPECT_EQ(parsed->eps, 1e-6);
  EXPECT_EQ(parsed->beta2, 0.999);
  EXPECT_EQ(back->clip_grad_norm, 0.1);
  // Spelling out a default changes nothing: the value is canonical.
  absl::StatusOr<Pipeline> spelled =
      ParsePipeline("training-step{params=w,optimizer=adamw{lr=0.001,beta1=0.9}}",
                    RegisteredPasses());
  ASSERT_TRUE(spelled.ok()) << spelled.status();
  EXPECT_EQ(spelled->ToString(), "training-step{params=w,optimizer=adamw}");
}

TEST(TrainingStepOptionsTest, OutOfRangeAndMalformedValuesAreUsageErrorsNamingTheOption) {
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{lr=-1}}"),
              HasSubstr("option 'optimizer': adamw: option 'lr' must be a finite number >= 0, "
                        "got -1"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{beta1=1}}"),
              HasSubstr("option 'beta1' must be a finite number in [0, 1), got 1"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{eps=nan}}"),
              HasSubstr("option 'eps' expects a finite number, got 'nan'"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{lr=1,lr=2}}"),
              HasSubstr("adamw's option 'lr' is given twice"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{lr}}"),
              HasSubstr("adamw's option 'lr' needs a value"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{lr=1,}}"),
              HasSubstr("adamw's options have an empty item in 'adamw{lr=1,}'"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adam}"),
              HasSubstr("option 'optimizer' expects one of sgd, adamw, got 'adam'"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=sgd{lr=1}}"),
              HasSubstr("sgd has no option 'lr'; its options: none"));
  EXPECT_THAT(ParseError("training-step{params=w,optimizer=adamw{lr=1"),
              HasSubstr("expected '}' closing the choice's options"));
  EXPECT_THAT(ParseError("training-step{params=w,clip_grad_norm=-0.5}"),
              HasSubstr("option 'clip_grad_norm' must be a finite number >= 0, got -0.5"));
  EXPECT_THAT(ParseError("training-step{params=w,clip_grad_norm=inf}"),
              HasSubstr("option 'clip_grad_norm' expects a finite number, got 'inf'"));
}

// SGD's `lr` beside adamw would be ignored: the pass refuses it, naming what to write.
TEST(TrainingStepOptionsTest, SgdsLearningRateWithAdamWIsRefused) {
  absl::StatusOr<Pipeline> pipeline =
      ParsePipeline("training-step{params=w,lr=0.1,optimizer=adamw}", RegisteredPasses());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  std::unique_ptr<Module> module = std::make_unique<Module>();
  absl::Status run = RunPipeline(*module, *pipeline);
  EXPECT_THAT(std::string(run.message()),
              HasSubstr("lr is sgd's learning rate; give adamw its own, optimizer=adamw{lr=0.1}"));
}

TEST(TrainingStepOptionsTest, ListPassesShowsTheChoiceAndItsOptionsWithTheirRanges) {
  const std::string listed = DescribePasses(RegisteredPasses());
  EXPECT_THAT(listed, HasSubstr("    optimizer: sgd|adamw{...} = sgd\n"));
  EXPECT_THAT(listed, HasSubstr("        adamw{lr: number >= 0 = 0.001}\n"));
  EXPECT_THAT(listed, HasSubstr("        adamw{beta2: number in [0, 1) = 0.999}\n"));
  EXPECT_THAT(listed, HasSubstr("    clip_grad_norm: number >= 0 = 0\n"));
}

}  // namespace
}  // namespace commir
