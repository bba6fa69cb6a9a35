// The --steps loop: the feedback rule, the order in which results are fed back, a loss
// that is not finite, and the report lines.
#include "tools/step_loop.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;

Tensor Scalar(double v) { return Tensor::FromDouble(ElementType::kF32, {}, {v}); }

absl::StatusOr<int> ParamCount(const std::string& signature) {
  std::unique_ptr<Module> module = testing::ParseForTest(signature);
  if (module == nullptr) return absl::InternalError("did not parse");
  return SteppedParamCount(*module->functions().front());
}

TEST(SteppedParamCountTest, CountsTheResultsAfterTheLoss) {
  absl::StatusOr<int> k =
      ParamCount(R"(func @s(%a: f32[2], %b: bf16[3, 4], %x: f32[5]) -> (f32[], f32[2], bf16[3, 4]) {
  %loss = reduce_sum(%x) {dims = [0]}
  return %loss, %a, %b
})");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, 2);
}

TEST(SteppedParamCountTest, RefusesAnElementTypeThatDiffersFromTheArgument) {
  absl::StatusOr<int> k = ParamCount(R"(func @s(%a: f32[2]) -> (f32[], bf16[2]) {
  %loss = reduce_sum(%a) {dims = [0]}
  %b = convert(%a) : bf16[2]
  return %loss, %b
})");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("result 1 (bf16[2]) feeds argument 0 (f32[2])"));
}

TEST(SteppedParamCountTest, RefusesMoreParamsThanArguments) {
  absl::StatusOr<int> k = ParamCount(R"(func @s(%a: f32[]) -> (f32[], f32[], f32[]) {
  return %a, %a, %a
})");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("returns 2 values after the loss but takes only 1"));
}

TEST(RunStepsTest, FeedsResultIPlusOneIntoArgumentIAndKeepsTheRest) {
  // loss = a + b + x; a' = 2a, b' = b + 1; x stays.
  std::vector<std::vector<double>> seen;
  StepRunner run = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    const double a = in[0].ToDouble()[0], b = in[1].ToDouble()[0], x = in[2].ToDouble()[0];
    seen.push_back({a, b, x});
    out = {Scalar(a + b + x), Scalar(2 * a), Scalar(b + 1)};
    return std::optional<Failure>();
  };
  StepTrace trace;
  ASSERT_FALSE(RunSteps(3, 2, {Scalar(1), Scalar(10), Scalar(100)}, run, false, trace));
  EXPECT_EQ(trace.losses, (std::vector<double>{111, 113, 116}));
  EXPECT_EQ(seen.back(), (std::vector<double>{4, 12, 100}));
  ASSERT_EQ(trace.final_results.size(), 3u);
  EXPECT_EQ(trace.final_results[0].ToDouble()[0], 116);
  EXPECT_EQ(trace.final_results[1].ToDouble()[0], 8);
  EXPECT_EQ(trace.final_results[2].ToDouble()[0], 13);
}

TEST(RunStepsTest, ANonFiniteLossStopsTheLoopUnlessAllowed) {
  int runs = 0;
  StepRunner run = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    ++runs;
    const double a = in[0].ToDouble()[0];
    out = {Scalar(runs == 2 ? std::numeric_limits<double>::infinity() : a), Scalar(a)};
    return std::optional<Failure>();
  };
  StepTrace trace;
  std::optional<Failure> failure = RunSteps(4, 1, {Scalar(1)}, run, false, trace);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code, kExitInvalidInput);
  EXPECT_THAT(failure->message, HasSubstr("step 2: the loss is inf"));
  EXPECT_EQ(runs, 2);
  runs = 0;
  StepTrace allowed;
  EXPECT_FALSE(RunSteps(4, 1, {Scalar(1)}, run, true, allowed));
  EXPECT_EQ(allowed.losses.size(), 4u);
}

TEST(RunStepsTest, ARunnerFailureIsPassedOn) {
  StepRunner run = [](const std::vector<Tensor>&, std::vector<Tensor>&) {
    return std::optional<Failure>(Failure{kExitBackendFailure, "error: device lost"});
  };
  StepTrace trace;
  std::optional<Failure> failure = RunSteps(2, 1, {Scalar(1)}, run, false, trace);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code, kExitBackendFailure);
}

TEST(StepLineTest, ShowsTheReferenceAndTheVerdict) {
  EXPECT_EQ(FormatStepLine(3, 0.8123401, std::nullopt, 1e-5), "step 3 loss 0.812340");
  EXPECT_EQ(FormatStepLine(1, 2.0, 2.0, 1e-5),
            "step 1 loss 2.000000  reference 2.000000  rel_diff 0.0e+00  PASS");
  EXPECT_THAT(FormatStepLine(1, 2.0, 2.1, 1e-5), HasSubstr("FAIL"));
  EXPECT_TRUE(LossesAgree(1.0, 1.0 + 1e-7, 1e-5));
  EXPECT_FALSE(LossesAgree(1.0, 1.001, 1e-5));
  EXPECT_FALSE(LossesAgree(std::nan(""), 1.0, 1e-5));
}

}  // namespace
}  // namespace commir
