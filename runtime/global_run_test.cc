#include "runtime/global_run.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs no tensor op: the programs below only move their arguments, so what is tested is
// the splitting and assembly around the interpreter.
class NoOpBackend : public Backend {
 public:
  absl::string_view name() const override { return "no-op"; }
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation&, const OpContext&,
                                            absl::Span<const Tensor* const>,
                                            absl::Span<const int64_t>) override {
    return absl::InternalError("no tensor ops here");
  }
  absl::StatusOr<std::vector<Tensor>> RunCollective(const Operation&, const CollectiveContext&,
                                                    absl::Span<const Tensor* const>) override {
    return absl::InternalError("no collectives here");
  }
};

std::unique_ptr<Module> Parse(const char* text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "test");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? *std::move(module) : nullptr;
}

Tensor Iota(std::vector<int64_t> shape) {
  std::vector<double> values;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<double>(i));
  return Tensor::FromDouble(ElementType::kF32, shape, values);
}

TEST(GlobalRunTest, SpmdFunctionSplitsInputsAndAssemblesResults) {
  auto module = Parse(
      "mesh @m(dp=2, tp=2)\n"
      "spmd func @f(%x: f32[4@dp, 6@tp], %r: f32[3]) -> (f32[4@dp, 6@tp], f32[3]) on @m {\n"
      "  return %x, %r\n}\n");
  ASSERT_NE(module, nullptr);
  NoOpBackend backend;
  absl::StatusOr<std::vector<Tensor>> results = RunWithGlobalTensors(
      *module->FindFunction("f"), backend, {Iota({4, 6}), Iota({3})});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  EXPECT_TRUE((*results)[0].BitwiseEqual(Iota({4, 6})));
  EXPECT_THAT((*results)[1].ToDouble(), ElementsAre(0, 1, 2));
}

TEST(GlobalRunTest, ReportsTheStageThatFailed) {
  auto module = Parse(
      "mesh @m(tp=2)\n"
      "spmd func @f(%x: f32[4@tp]) -> f32[4@tp] on @m {\n"
      "  %y = neg(%x)\n"
      "  return %y\n}\n");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  NoOpBackend backend;
  GlobalRunFailure failure;

  absl::StatusOr<std::vector<Tensor>> split = RunWithGlobalTensors(f, backend, {Iota({5})}, {}, &failure);
  EXPECT_FALSE(split.ok());
  EXPECT_EQ(failure.stage, GlobalRunFailure::Stage::kSplit);

  absl::StatusOr<std::vector<Tensor>> run = RunWithGlobalTensors(f, backend, {Iota({4})}, {}, &failure);
  EXPECT_THAT(run.status().message(), HasSubstr("no tensor ops here"));
  EXPECT_EQ(failure.stage, GlobalRunFailure::Stage::kRun);
  EXPECT_EQ(failure.location.line, 3);

  GlobalRunOptions options;
  options.local_devices = {7};
  absl::StatusOr<std::vector<Tensor>> local = RunWithGlobalTensors(f, backend, {Iota({4})}, options, &failure);
  EXPECT_FALSE(local.ok());
  EXPECT_EQ(failure.stage, GlobalRunFailure::Stage::kLocalDevices);
}

}  // namespace
}  // namespace commir::runtime
