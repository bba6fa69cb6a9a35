// The model written as CommIR: it verifies and prints back the same, @layer is the plan
// search's layer program at tp = cp = 1 (one generator), and on a tiny model @model
// runs on the cpu backend with its calls and after `inline` to the same bits.
#include "absl/strings/str_cat.h"
#include "commir/element_type.h"
#include "search/plan/embedding_program.h"
#include "search/plan/model_program.h"

#include <memory>
#include <string>
#include <vector>

#include "backend_cpu/cpu_backend.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "transforms/inline.h"

namespace commir::search::plan {
namespace {

using runtime::Tensor;

ModelSpec Tiny(const std::string& arch) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(
      "name=tiny,arch=" + arch +
      ",layers=3,hidden=16,heads=4,kv_heads=2,ffn=24,seq=8,vocab=40,global_batch=8,dtype=f32");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "model.commir");
  EXPECT_TRUE(module.ok()) << module.status() << "\n" << text;
  return module.ok() ? *std::move(module) : nullptr;
}

int CountCalls(const Function& f, const std::string& callee) {
  int n = 0;
  WalkOps(f.body(), [&](Operation* op) {
    if (op->Is(OpKind::kCall) && op->attrs().Find("callee")->string_value() == callee) ++n;
  });
  return n;
}

std::vector<Tensor> RunOnCpu(const Function& f, const std::vector<Tensor>& inputs) {
  cpu::CpuBackend backend;
  absl::StatusOr<std::vector<Tensor>> results = runtime::RunWithGlobalTensors(f, backend, inputs);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : std::vector<Tensor>{};
}

class ModelProgramTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelProgramTest, VerifiesAndPrintsBackTheSame) {
  for (const char* preset : {"gpt3-1.3b", "llama3-8b"}) {
    absl::StatusOr<ModelSpec> m = Preset(preset);
    ASSERT_TRUE(m.ok());
    if (std::string(preset).substr(0, 3) != std::string(GetParam()).substr(0, 3)) continue;
    m->layers = 4;  // the full depth only repeats the call
    absl::StatusOr<std::string> text = ModelProgram(*m, 2);
    ASSERT_TRUE(text.ok()) << text.status();
    std::unique_ptr<Module> module = Parse(*text);
    ASSERT_NE(module, nullptr);
    // Already canonical: printing it back changes nothing.
    EXPECT_EQ(PrintModule(*module), *text);
    const Function* model = module->FindFunction(kModelFunction);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(CountCalls(*model, kLayerFunction), 4);
    EXPECT_EQ(CountCalls(*model, kHeadFunction), 1);
    EXPECT_EQ(CountCalls(*model, kEmbedFunction), 1);
    EXPECT_TRUE(module->meshes().empty());
    // Token ids [micro_batch, seq] in, the loss (a scalar) out, with the labels the last
    // argument.
    EXPECT_EQ(model->arg_types()[0].ToString(), absl::StrCat("i32[2, ", m->sequence, "]"));
    EXPECT_EQ(model->arg_types().back().ToString(), absl::StrCat("i32[2, ", m->sequence, "]"));
    EXPECT_TRUE(model->result_types()[0].dims().empty());
    // GPT's head is tied to the embedding's table (one argument passed to both); Llama's
    // output weight is an argument of its own.
    const Operation* embed = nullptr;
    const Operation* head = nullptr;
    WalkOps(model->body(), [&](Operation* op) {
      if (!op->Is(OpKind::kCall)) return;
      const std::string callee = op->attrs().Find("callee")->string_value();
      if (callee == kEmbedFunction) embed = op;
      if (callee == kHeadFunction) head = op;
    });
    ASSERT_TRUE(embed != nullptr && head != nullptr);
    bool shares_table = false;
    for (int i = 1; i < head->num_operands(); ++i) {
      shares_table = shares_table || head->operand(i) == embed->operand(1);
    }
    EXPECT_EQ(shares_table, m->architecture == Architecture::kGpt);
    // The model's parameters besides its layers' (its arguments less the ids, the labels
    // and the layers' weights) are the embeddings' published count: GPT's one table
    // (tied) with positions and the final LayerNorm, Llama's two tables and final RMSNorm.
    auto elements = [](Type t) {
      int64_t n = 1;
      for (int64_t d : t.dims()) n *= d;
      return n;
    };
    int64_t parameters = 0;
    for (size_t i = 1; i + 1 < model->arg_types().size(); ++i) {
      parameters += elements(model->arg_types()[i]);
    }
    const Function* layer = module->FindFunction(kLayerFunction);
    for (size_t i = 1; i < layer->arg_types().size(); ++i) {
      parameters -= m->layers * elements(layer->arg_types()[i]);
    }
    EXPECT_EQ(parameters, EmbeddingParameters(*m));
  }
}

TEST_P(ModelProgramTest, LayerIsThePlanSearchsLayerOnOneDevice) {
  const ModelSpec m = Tiny(GetParam());
  absl::StatusOr<std::string> text = ModelProgram(m, 2);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::unique_ptr<Module>> layer =
      TransformerLayerProgram(m, LayerLayout{1, 1, false, 2});
  ASSERT_TRUE(layer.ok()) << layer.status();
  std::unique_ptr<Module> model = Parse(*text);
  std::unique_ptr<Module> alone = *std::move(layer);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(PrintFunction(*model->FindFunction(kLayerFunction)),
            PrintFunction(*alone->FindFunction(kLayerFunction)));
}

TEST_P(ModelProgramTest, CallsRunLikeTheInlinedModel) {
  const ModelSpec m = Tiny(GetParam());
  absl::StatusOr<std::string> text = ModelProgram(m, 2);
  ASSERT_TRUE(text.ok()) << text.status();
  std::unique_ptr<Module> calls = Parse(*text);
  std::unique_ptr<Module> inlined = Parse(*text);
  ASSERT_NE(calls, nullptr);
  ASSERT_NE(inlined, nullptr);
  Function& model = *inlined->FindFunction(kModelFunction);
  absl::StatusOr<int64_t> count = InlineCalls(model);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, m.layers + 2);
  EXPECT_FALSE(HasCalls(model));

  std::vector<Tensor> inputs;
  for (size_t i = 0; i < model.arg_types().size(); ++i) {
    const Type t = model.arg_types()[i];
    if (IsFloatType(t.element_type())) {
      inputs.push_back(
          runtime::RandomGlobalTensor(5, static_cast<int>(i), t.element_type(), t.dims()));
      continue;
    }
    // Token ids and labels: rows of the vocabulary.
    Tensor tokens(t.element_type(), t.dims());
    for (int64_t j = 0; j < tokens.num_elements(); ++j) {
      tokens.data<int32_t>()[j] = static_cast<int32_t>((7 * j + 3 * i) % m.vocabulary);
    }
    inputs.push_back(std::move(tokens));
  }
  std::vector<Tensor> by_calls = RunOnCpu(*calls->FindFunction(kModelFunction), inputs);
  std::vector<Tensor> by_inlining = RunOnCpu(model, inputs);
  ASSERT_EQ(by_calls.size(), 1u);
  ASSERT_EQ(by_inlining.size(), 1u);
  // The same kernels on the same values in the same order.
  EXPECT_TRUE(by_calls[0].BitwiseEqual(by_inlining[0]));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ModelProgramTest, ::testing::Values("gpt", "llama"));

TEST(ModelProgram, BadMicroBatchOrSpecIsAnError) {
  absl::StatusOr<ModelSpec> m = Preset("llama3-8b");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(ModelProgram(*m, 0).ok());
  m->heads = 0;
  EXPECT_FALSE(ModelProgram(*m, 1).ok());
}

}  // namespace
}  // namespace commir::search::plan
