// Calls on the cpu mesh: a model whose layer is written once and called four times runs
// the same as the model with the layer copied out by hand (bit for bit on one device),
// and, partitioned (propagate-sharding inlines the calls first) on 2 and 4 devices, the
// same as its single-device run; a spmd layer called in a loop body on the mesh equals
// its inlined loop; the interpreter refuses a recursive call it was handed unverified.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/ir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"
#include "transforms/inline.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;

// A pre-norm MLP block (rmsnorm, up projection, gelu, down projection, residual).
constexpr char kLayer[] = R"(
func @layer(%x: f32[8, 16], %g: f32[16], %up: f32[16, 32], %down: f32[32, 16]) -> f32[8, 16] {
  %n = rmsnorm(%x, %g)
  %h = matmul(%n, %up)
  %a = gelu(%h)
  %d = matmul(%a, %down)
  %y = add(%x, %d)
  return %y
}
)";

// The model's layer L's weights, sliced out of the stacked arguments.
std::string Weights(int layer) {
  return absl::StrReplaceAll(R"(
  %gL2 = slice(%g) {start = [L, 0], size = [1, 16]}
  %gL = reshape(%gL2) : f32[16]
  %uL3 = slice(%up) {start = [L, 0, 0], size = [1, 16, 32]}
  %uL = reshape(%uL3) : f32[16, 32]
  %dL3 = slice(%down) {start = [L, 0, 0], size = [1, 32, 16]}
  %dL = reshape(%dL3) : f32[32, 16]
)",
                             {{"L", absl::StrCat(layer)}});
}

// The model with the layer called four times, or with its body copied four times.
std::string Model(bool copied, const std::string& mesh) {
  std::string text =
      absl::StrCat(mesh, "\n", kLayer, "\n",
                   "func @model(%x: f32[8, 16], %g: f32[4, 16], %up: f32[4, 16, 32], "
                   "%down: f32[4, 32, 16]) -> f32[8, 16] {\n");
  for (int l = 0; l < 4; ++l) {
    absl::StrAppend(&text, Weights(l));
    std::string in = l == 0 ? "%x" : absl::StrCat("%x", l), out = absl::StrCat("%x", l + 1);
    if (copied) {
      absl::StrAppend(&text,
                      absl::StrReplaceAll(R"(
  %nL = rmsnorm(IN, %gL)
  %hL = matmul(%nL, %uL)
  %aL = gelu(%hL)
  %ddL = matmul(%aL, %dL)
  OUT = add(IN, %ddL)
)",
                                          {{"L", absl::StrCat(l)}, {"IN", in}, {"OUT", out}}));
    } else {
      absl::StrAppend(
          &text, "  ", out, " = call @layer(", in,
          absl::StrReplaceAll(", %gL, %uL, %dL) : f32[8, 16]\n", {{"L", absl::StrCat(l)}}));
    }
  }
  absl::StrAppend(&text, "  return %x4\n}\n");
  return text;
}

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "model.commir");
  EXPECT_TRUE(module.ok()) << module.status() << "\n" << text;
  return module.ok() ? *std::move(module) : nullptr;
}

std::vector<Tensor> Inputs(const Function& function) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < function.arg_types().size(); ++i) {
    Type t = function.arg_types()[i];
    inputs.push_back(
        runtime::RandomGlobalTensor(11, static_cast<int>(i), t.element_type(), t.dims()));
  }
  return inputs;
}

std::vector<Tensor> RunGlobal(const Function& function, const std::vector<Tensor>& inputs) {
  CpuBackend backend;
  absl::StatusOr<std::vector<Tensor>> results =
      runtime::RunWithGlobalTensors(function, backend, inputs);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : std::vector<Tensor>{};
}

TEST(CallExecutionTest, LayerCalledFourTimesEqualsTheCopiedLayers) {
  std::unique_ptr<Module> calls = Parse(Model(false, ""));
  std::unique_ptr<Module> copied = Parse(Model(true, ""));
  ASSERT_NE(calls, nullptr);
  ASSERT_NE(copied, nullptr);
  const Function& model = *calls->FindFunction("model");
  std::vector<Tensor> inputs = Inputs(model);
  std::vector<Tensor> by_calls = RunGlobal(model, inputs);
  std::vector<Tensor> by_copies = RunGlobal(*copied->FindFunction("model"), inputs);
  ASSERT_EQ(by_calls.size(), 1u);
  ASSERT_EQ(by_copies.size(), 1u);
  // The same kernels on the same values in the same order: bit for bit.
  EXPECT_TRUE(by_calls[0].BitwiseEqual(by_copies[0]));
  // And the layers did something: the output is not the input.
  EXPECT_FALSE(by_calls[0].BitwiseEqual(inputs[0]));
}

TEST(CallExecutionTest, PartitionedModelWithCallsMatchesOneDevice) {
  for (const char* mesh : {"mesh @m(tp=2)", "mesh @m(dp=2, tp=2)"}) {
    SCOPED_TRACE(mesh);
    // Tensor-parallel weights (up split by columns, down by rows) and, on the 2-D mesh,
    // the batch split over dp.
    std::string text = absl::StrReplaceAll(Model(false, mesh),
                                           {{"%up: f32[4, 16, 32]", "%up: f32[4, 16, 32@tp]"},
                                            {"%down: f32[4, 32, 16]", "%down: f32[4, 32@tp, 16]"}});
    if (absl::string_view(mesh).find("dp") != absl::string_view::npos) {
      text = absl::StrReplaceAll(text, {{"@model(%x: f32[8, 16]", "@model(%x: f32[8@dp, 16]"}});
    }
    std::unique_ptr<Module> global = Parse(text);
    std::unique_ptr<Module> partitioned = Parse(text);
    ASSERT_NE(global, nullptr);
    ASSERT_NE(partitioned, nullptr);
    ASSERT_TRUE(RunPipeline(*partitioned, sharding::DefaultSpmdPipeline(), {.verify_each = true})
                    .ok());
    const Function& spmd = *partitioned->FindFunction("model");
    ASSERT_TRUE(spmd.is_spmd());
    EXPECT_FALSE(HasCalls(spmd));
    std::vector<Tensor> inputs = Inputs(*global->FindFunction("model"));
    std::vector<Tensor> expected = RunGlobal(*global->FindFunction("model"), inputs);
    std::vector<Tensor> actual = RunGlobal(spmd, inputs);
    ASSERT_EQ(expected.size(), 1u);
    ASSERT_EQ(actual.size(), 1u);
    runtime::Comparison c = runtime::CompareWithReference("y", actual[0], expected[0], 1e-5);
    EXPECT_TRUE(c.pass) << runtime::FormatComparison(c);
  }
}

// A spmd layer (a column-parallel matmul and its all_gather) called in a loop body.
constexpr char kSpmdLoop[] = R"(
mesh @m(tp=4)

spmd func @layer(%x: f32[4, 8], %w: f32[8, 8@tp]) -> f32[4, 8] {
  %h = matmul(%x, %w) : f32[4, 2]
  %g = all_gather(%h) {axis = tp, dim = 1}
  %y = tanh(%g)
  return %y
}

spmd func @model(%x: f32[4, 8], %w: f32[8, 8@tp]) -> f32[4, 8] {
  %r = for %i = 0 to 4 iter(%a = %x) {
    %b = call @layer(%a, %w) : f32[4, 8]
    yield %b
  } : f32[4, 8]
  return %r
}
)";

TEST(CallExecutionTest, SpmdCallInALoopEqualsItsInlinedLoop) {
  std::unique_ptr<Module> calls = Parse(kSpmdLoop);
  std::unique_ptr<Module> inlined = Parse(kSpmdLoop);
  ASSERT_NE(calls, nullptr);
  ASSERT_NE(inlined, nullptr);
  absl::StatusOr<int64_t> count = InlineCalls(*inlined);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1);
  std::vector<Tensor> inputs = Inputs(*calls->FindFunction("model"));
  std::vector<Tensor> by_calls = RunGlobal(*calls->FindFunction("model"), inputs);
  std::vector<Tensor> by_inlining = RunGlobal(*inlined->FindFunction("model"), inputs);
  ASSERT_EQ(by_calls.size(), 1u);
  ASSERT_EQ(by_inlining.size(), 1u);
  EXPECT_TRUE(by_calls[0].BitwiseEqual(by_inlining[0]));
  EXPECT_FALSE(by_calls[0].BitwiseEqual(inputs[0]));
}

// Nested calls (a block calling a linear layer, called twice) and a callee with two
// results, one of them an argument passed through.
constexpr char kNested[] = R"(
func @linear(%x: f32[4, 8], %w: f32[8, 8]) -> f32[4, 8] {
  %h = matmul(%x, %w)
  return %h
}

func @block(%x: f32[4, 8], %w: f32[8, 8]) -> (f32[4, 8], f32[4, 8]) {
  %h = call @linear(%x, %w) : f32[4, 8]
  %y = tanh(%h)
  return %y, %x
}

func @model(%x: f32[4, 8], %w: f32[8, 8]) -> f32[4, 8] {
  %a, %a_in = call @block(%x, %w) : (f32[4, 8], f32[4, 8])
  %b, %b_in = call @block(%a, %w) : (f32[4, 8], f32[4, 8])
  %s = add(%b, %a_in)
  %o = sub(%s, %b_in)
  return %o
}
)";

TEST(CallExecutionTest, NestedCallsEqualTheirInlinedFunction) {
  std::unique_ptr<Module> calls = Parse(kNested);
  std::unique_ptr<Module> inlined = Parse(kNested);
  ASSERT_NE(calls, nullptr);
  ASSERT_NE(inlined, nullptr);
  absl::StatusOr<int64_t> count = InlineCalls(*inlined->FindFunction("model"));
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 4);  // two blocks, then the linear layer of each
  EXPECT_FALSE(HasCalls(*inlined->FindFunction("model")));
  std::vector<Tensor> inputs = Inputs(*calls->FindFunction("model"));
  std::vector<Tensor> by_calls = RunGlobal(*calls->FindFunction("model"), inputs);
  std::vector<Tensor> by_inlining = RunGlobal(*inlined->FindFunction("model"), inputs);
  ASSERT_EQ(by_calls.size(), 1u);
  ASSERT_EQ(by_inlining.size(), 1u);
  EXPECT_TRUE(by_calls[0].BitwiseEqual(by_inlining[0]));
}

TEST(CallExecutionTest, UnverifiedRecursionIsAnErrorNotACrash) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module =
      ParseModule("func @f(%x: f32[4]) -> f32[4] {\n  %y = call @f(%x) : f32[4]\n  return %y\n}\n",
                  diagnostics, ParseOptions{.verify = false});
  ASSERT_NE(module, nullptr);
  CpuBackend backend;
  runtime::Interpreter interpreter(*module->FindFunction("f"), backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> results =
      interpreter.Run({{Tensor(ElementType::kF32, {4})}});
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("calls nest more than"));
  EXPECT_EQ(interpreter.error_location().line, 2);
  // The inliner refuses it too, rather than growing the function forever.
  absl::StatusOr<int64_t> inlined = InlineCalls(*module);
  ASSERT_FALSE(inlined.ok());
  EXPECT_THAT(inlined.status().message(), HasSubstr("recursion"));
}

}  // namespace
}  // namespace commir::cpu
