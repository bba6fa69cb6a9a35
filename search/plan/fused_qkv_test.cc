// The layer's one QKV projection (Megatron-LM's linear_qkv): it holds the parameters the
// model's closed form counts for q, k and v, and laid out Megatron-style and partitioned
// its forward communicates what Megatron-LM's layer with sequence parallelism does (two
// all-gathers before the column-parallel blocks, two reduce-scatters after the
// row-parallel ones; Korthikanti et al. 2022, Fig. 5), nothing between the QKV GEMM
// and the attention.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

ModelSpec Model(const std::string& text) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}

int64_t Elements(Type t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

// Every weight of the single-device layer (all arguments but the residual stream)
// against LayerParameters' closed form, less GPT's projection biases, which the
// program leaves out (layer_program.h).
TEST(FusedQkv, TheLayerHoldsTheModelsParameters) {
  for (const char* name : {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b",
                           "llama3-70b,kv_heads=4"}) {
    SCOPED_TRACE(name);
    const ModelSpec m = Model(name);
    absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(m, 1);
    ASSERT_TRUE(layer.ok()) << layer.status();
    const Function& f = *(*layer)->FindFunction(kLayerFunction);
    int64_t weights = 0;
    for (size_t i = 1; i < f.arg_types().size(); ++i) weights += Elements(f.arg_types()[i]);
    int64_t expected = LayerParameters(m);
    if (m.architecture == Architecture::kGpt) {
      const int64_t q = m.heads * m.head_dim(), kv = m.kv_heads * m.head_dim();
      expected -= (q + 2 * kv + m.hidden) + (m.ffn + m.hidden);
    }
    EXPECT_EQ(weights, expected);
  }
}

TEST(FusedQkv, ForwardCommunicatesAsMegatronLm) {
  struct Case {
    const char* model;
    int64_t tp;
  };
  for (const Case& c : {Case{"gpt3-175b", 4}, Case{"gpt3-175b", 8}, Case{"llama3-70b", 4},
                        Case{"llama3-70b", 8}}) {
    SCOPED_TRACE(absl::StrCat(c.model, " tp=", c.tp));
    absl::StatusOr<std::unique_ptr<Module>> program =
        TransformerLayerProgram(Model(c.model), LayerLayout{c.tp, 1, true, 1});
    ASSERT_TRUE(program.ok()) << program.status();
    ASSERT_TRUE(RunPipeline(**program, sharding::PartitionPipeline()).ok());
    const Function* layer = (*program)->FindFunction(kLayerFunction);
    ASSERT_NE(layer, nullptr);
    const sharding::FunctionCommReport report = sharding::ComputeCommReport(*layer);
    int64_t all_gathers = 0, reduce_scatters = 0, others = 0;
    for (const sharding::CollectiveTotals& t : report.collectives) {
      if (t.kind == OpKind::kAllGather) {
        all_gathers += t.count;
      } else if (t.kind == OpKind::kReduceScatter) {
        reduce_scatters += t.count;
      } else {
        others += t.count;
      }
    }
    EXPECT_EQ(all_gathers, 2);
    EXPECT_EQ(reduce_scatters, 2);
    EXPECT_EQ(others, 0);
    // The QKV GEMM's output reaches the attention through views of its own rank's groups.
    for (const Operation* op = layer->body()->front(); op != nullptr; op = op->next()) {
      if (op->Is(OpKind::kAllGather)) {
        EXPECT_NE(op->operand(0)->name(), "qkv");
      }
    }
  }
}

}  // namespace
}  // namespace commir::search::plan
