// The --steps loop: the feedback rule, the order in which results are fed back, a loss
// that is not finite, and the report lines.
#include "tools/step_loop.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
  std::vector<double> losses;
  std::vector<Tensor> final_results;
  ASSERT_FALSE(RunSteps(3, 2, {Scalar(1), Scalar(10), Scalar(100)}, run, false,
                        [&](int, double loss) { losses.push_back(loss); }, final_results));
  EXPECT_EQ(losses, (std::vector<double>{111, 113, 116}));
  EXPECT_EQ(seen.back(), (std::vector<double>{4, 12, 100}));
  ASSERT_EQ(final_results.size(), 3u);
  EXPECT_EQ(final_results[0].ToDouble()[0], 116);
  EXPECT_EQ(final_results[1].ToDouble()[0], 8);
  EXPECT_EQ(final_results[2].ToDouble()[0], 13);
}

TEST(RunStepsTest, ANonFiniteLossStopsTheLoopUnlessAllowed) {
  int runs = 0;
  StepRunner run = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    ++runs;
    const double a = in[0].ToDouble()[0];
    out = {Scalar(runs == 2 ? std::numeric_limits<double>::infinity() : a), Scalar(a)};
    return std::optional<Failure>();
  };
  std::vector<int> reported;
  StepCallback on_step = [&](int step, double) { reported.push_back(step); };
  std::vector<Tensor> final_results;
  std::optional<Failure> failure = RunSteps(4, 1, {Scalar(1)}, run, false, on_step, final_results);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code, kExitInvalidInput);
  EXPECT_THAT(failure->message, HasSubstr("step 2: the loss is inf"));
  EXPECT_EQ(runs, 2);
  // The step before the failing one was reported when it ended.
  EXPECT_EQ(reported, (std::vector<int>{1}));
  runs = 0;
  reported.clear();
  EXPECT_FALSE(RunSteps(4, 1, {Scalar(1)}, run, true, on_step, final_results));
  EXPECT_EQ(reported, (std::vector<int>{1, 2, 3, 4}));
}

TEST(RunStepsTest, ARunnerFailureIsPassedOn) {
  StepRunner run = [](const std::vector<Tensor>&, std::vector<Tensor>&) {
    return std::optional<Failure>(Failure{kExitBackendFailure, "error: device lost"});
  };
  std::vector<Tensor> final_results;
  std::optional<Failure> failure = RunSteps(2, 1, {Scalar(1)}, run, false, nullptr, final_results);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code, kExitBackendFailure);
}

TEST(RunStepsTest, EachStepIsReportedWhenItEndsBeforeTheNextRuns) {
  // The runner fails at step 3; the callback must already have seen steps 1 and 2, in
  // order, each before the next step started.
  std::vector<std::string> order;
  StepRunner run = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    order.push_back(absl::StrCat("run ", order.size() / 2 + 1));
    if (order.size() == 5) {
      return std::optional<Failure>(Failure{kExitBackendFailure, "error: device lost"});
    }
    out = {Scalar(in[0].ToDouble()[0]), Scalar(in[0].ToDouble()[0] + 1)};
    return std::optional<Failure>();
  };
  std::vector<Tensor> final_results;
  std::optional<Failure> failure = RunSteps(
      5, 1, {Scalar(1)}, run, false,
      [&](int step, double loss) { order.push_back(absl::StrCat("step ", step, " ", loss)); },
      final_results);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(order, (std::vector<std::string>{"run 1", "step 1 1", "run 2", "step 2 2", "run 3"}));
}

TEST(StepLoopTest, StepsOneAtATimeAndKeepsTheLastResults) {
  int step = 0;
  StepRunner run = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    ++step;
    out = {Scalar(in[0].ToDouble()[0]), Scalar(step)};
    return std::optional<Failure>();
  };
  StepLoop loop(1, {Scalar(0)}, run, false);
  for (int i = 0; i < 1000; ++i) {
    double loss = 0;
    ASSERT_FALSE(loop.Step(loss));
    EXPECT_EQ(loss, i);
  }
  EXPECT_EQ(loop.steps_run(), 1000);
  std::vector<Tensor> last = loop.LastResults();
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].ToDouble()[0], 999);
  EXPECT_EQ(last[1].ToDouble()[0], 1000);
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
