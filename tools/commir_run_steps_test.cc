// commir-run --steps: a hand-written step function whose loss shrinks by a known factor
// per step (so the feedback of result i+1 into argument i is checked by the numbers),
// the loss curve checked against a reference, a reference that trains differently, and
// the refusals of functions that do not follow the feedback rule and of bad flags.
//
// The binary's path comes as the first argument (commir_run_test in tools/BUILD).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string g_binary;  // set by main()

// loss = mean((w - t)^2) over 4 elements; dloss/dw = (w - t) / 2; the update with
// learning rate LR: w - LR * (w - t) / 2. So w - t shrinks by (1 - LR/2) each step and
// the loss by its square. The params are split over tp: the run is partitioned.
std::string Step(const std::string& lr) {
  return absl::StrCat(R"(mesh @m(tp=2)
func @step(%w: f32[4@tp], %t: f32[4@tp]) -> (f32[], f32[4@tp]) {
  %e = sub(%w, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0]}
  %g = mul(%e, 0.5)
  %s = mul(%g, )",
                      lr, R"()
  %new_w = sub(%w, %s)
  return %loss, %new_w
}
)");
}

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
}

std::string WriteProgram(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

testing::SubprocessResult RunTool(std::vector<std::string> args) {
  absl::StatusOr<testing::SubprocessResult> run = testing::RunSubprocess(g_binary, args);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : testing::SubprocessResult{};
}

// The loss of each "step N loss X ..." line, in order.
std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double loss = 0;
    if (words.size() >= 4 && words[0] == "step" && words[2] == "loss" &&
        absl::SimpleAtod(words[3], &loss)) {
      losses.push_back(loss);
    }
  }
  return losses;
}

TEST(CommirRunStepsTest, FeedsTheNewParamsBackSoTheLossShrinksByTheKnownFactor) {
  const std::string program = WriteProgram("step.commir", Step("0.5"));
  const std::string out_dir = TempPath("final_params");
  testing::SubprocessResult run =
      RunTool({program, "--steps=4", "--seed=3", absl::StrCat("--output-dir=", out_dir)});
  ASSERT_EQ(run.exit_code, 0) << run;
  const std::vector<double> losses = Losses(run.out);
  ASSERT_EQ(losses.size(), 4u) << run.out;
  ASSERT_GT(losses[0], 0.01) << run.out;
  for (int i = 1; i < 4; ++i) {
    EXPECT_NEAR(losses[i] / losses[i - 1], 0.75 * 0.75, 1e-4) << run.out;
  }
  // The final params are summarized like any result, and --output-dir writes the last
  // step's results.
  EXPECT_THAT(run.out, HasSubstr("%new_w  f32[4]")) << run.out;
  EXPECT_TRUE(std::filesystem::exists(out_dir + "/result0.npy"));
  EXPECT_TRUE(std::filesystem::exists(out_dir + "/result1.npy"));
}

TEST(CommirRunStepsTest, CheckComparesEveryStepsLossAndTheFinalParams) {
  const std::string program = WriteProgram("step_check.commir", Step("0.5"));
  testing::SubprocessResult run = RunTool({program, "--steps=3", "--check"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("step 3 loss ")) << run.out;
  EXPECT_THAT(run.out, HasSubstr("  reference ")) << run.out;
  EXPECT_THAT(run.out, HasSubstr("%new_w  f32[4]  rel_l2=")) << run.out;
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("FAIL"))) << run.out;
}

TEST(CommirRunStepsTest, AReferenceThatTrainsDifferentlyFailsFromItsFirstDifferentStep) {
  const std::string program = WriteProgram("step_lr05.commir", Step("0.5"));
  const std::string reference = WriteProgram("step_lr025.commir", Step("0.25"));
  testing::SubprocessResult run =
      RunTool({program, "--steps=3", absl::StrCat("--check-against=", reference)});
  EXPECT_EQ(run.exit_code, 1) << run;
  // The same params give the same first loss; the updates differ from then on.
  EXPECT_THAT(run.out, ::testing::ContainsRegex("step 1 loss [0-9.]+  reference [0-9.]+  "
                                                "rel_diff [0-9.e+-]+  PASS"))
      << run.out;
  EXPECT_THAT(run.out, ::testing::ContainsRegex("step 2 loss .*FAIL")) << run.out;
}

TEST(CommirRunStepsTest, EachStepIsPrintedBeforeALaterStepFails) {
  // w grows by 1e30 per step: step 1's loss is finite, step 2's overflows f32 to inf.
  const std::string program =
      WriteProgram("diverges.commir", R"(func @step(%w: f32[4]) -> (f32[], f32[4]) {
  %sq = mul(%w, %w)
  %loss = reduce_sum(%sq) {dims = [0]}
  %new_w = mul(%w, 1e30)
  return %loss, %new_w
}
)");
  testing::SubprocessResult run = RunTool({program, "--steps=3", "--seed=3"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("step 2: the loss is inf")) << run;
  const std::vector<double> losses = Losses(run.out);
  ASSERT_EQ(losses.size(), 1u) << run.out;
  EXPECT_TRUE(std::isfinite(losses[0])) << run.out;
}

// Optimizer state: %c follows the param and is fed back like it; @step_init gives its
// first value (10, where a random input would lie in [-1, 1)). The loss is c itself, so
// step k's loss is 10 + (k - 1) exactly.
constexpr char kCountingStep[] = R"(mesh @m(tp=2)
func @step(%w: f32[4@tp], %c: f32[], %t: f32[4@tp]) -> (f32[], f32[4@tp], f32[]) {
  %loss = add(%c, 0.0)
  %new_c = add(%c, 1.0)
  return %loss, %w, %new_c
}
func @step_init(%w: f32[4@tp]) -> f32[] {
  %c = full() {value = 10.0} : f32[]
  return %c
}
)";

TEST(CommirRunStepsTest, FeedsTheStateBackFromItsInitFunctionsValue) {
  const std::string program = WriteProgram("state.commir", kCountingStep);
  testing::SubprocessResult run = RunTool({program, "--func=@step", "--steps=3", "--check"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_EQ(Losses(run.out), (std::vector<double>{10, 11, 12})) << run.out;
}

// A run resumes from saved state: the last step's new %c (result 2, 13 after three steps
// from 10) given with --input replaces @step_init's first value.
TEST(CommirRunStepsTest, AStateArgumentGivenWithInputKeepsThatValue) {
  const std::string program = WriteProgram("resume.commir", kCountingStep);
  const std::string out_dir = TempPath("saved_state");
  testing::SubprocessResult first = RunTool(
      {program, "--func=@step", "--steps=3", absl::StrCat("--output-dir=", out_dir)});
  ASSERT_EQ(first.exit_code, 0) << first;
  testing::SubprocessResult resumed =
      RunTool({program, "--func=@step", "--steps=2", "--input",
               absl::StrCat("c=", out_dir, "/result2.npy")});
  ASSERT_EQ(resumed.exit_code, 0) << resumed;
  EXPECT_EQ(Losses(resumed.out), (std::vector<double>{13, 14})) << resumed.out;
}

TEST(CommirRunStepsTest, RefusesAnInitFunctionThatDoesNotGiveTheState) {
  std::string text = kCountingStep;
  text.replace(text.find("func @step_init(%w: f32[4@tp]) -> f32[]"),
               std::string("func @step_init(%w: f32[4@tp]) -> f32[]").size(),
               "func @step_init(%w: f32[4@tp]) -> f64[]");
  text.replace(text.find(": f32[]\n  return %c"), std::string(": f32[]").size(), ": f64[]");
  const std::string program = WriteProgram("bad_init.commir", text);
  testing::SubprocessResult run = RunTool({program, "--func=@step", "--steps=2"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("@step_init's result 0 (f64[]) is @step's argument 1")) << run;
}

TEST(CommirRunStepsTest, RefusesAFunctionThatReturnsOnlyTheLoss) {
  const std::string program = WriteProgram("loss_only.commir", R"(func @f(%w: f32[4]) -> f32[] {
  %loss = reduce_sum(%w) {dims = [0]}
  return %loss
}
)");
  testing::SubprocessResult run = RunTool({program, "--steps=2"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("returns only the loss")) << run;
}

TEST(CommirRunStepsTest, RefusesAResultThatDoesNotMatchItsArgument) {
  const std::string program =
      WriteProgram("mismatch.commir", R"(func @f(%w: f32[4], %x: f32[2]) -> (f32[], f32[2]) {
  %loss = reduce_sum(%w) {dims = [0]}
  return %loss, %x
}
)");
  testing::SubprocessResult run = RunTool({program, "--steps=2"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("result 1 (f32[2]) feeds argument 0 (f32[4])")) << run;
}

TEST(CommirRunStepsTest, RefusesALossThatIsNotAScalar) {
  const std::string program =
      WriteProgram("vector_loss.commir", R"(func @f(%w: f32[4]) -> (f32[4], f32[4]) {
  return %w, %w
}
)");
  testing::SubprocessResult run = RunTool({program, "--steps=2"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("first result must be the loss, a float scalar")) << run;
}

TEST(CommirRunStepsTest, BadStepFlagsAreUsageErrors) {
  const std::string program = WriteProgram("step_usage.commir", Step("0.5"));
  for (const std::vector<std::string>& args : {std::vector<std::string>{program, "--steps=0"},
                                               {program, "--steps=two"},
                                               {program, "--steps=1000001"},
                                               {program, "--steps=99999999999999999999"},
                                               {program, "--steps=2", "--bench=3"},
                                               {program, "--steps=2", "--backend=sim"}}) {
    testing::SubprocessResult run = RunTool(args);
    EXPECT_EQ(run.exit_code, 2) << args.back() << "\n" << run;
    EXPECT_THAT(run.err, HasSubstr("--steps")) << run;
  }
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: commir_run_steps_test COMMIR_RUN\n";
    return 2;
  }
  commir::g_binary = argv[1];
  return RUN_ALL_TESTS();
}
