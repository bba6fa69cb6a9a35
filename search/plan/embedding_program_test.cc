// The input embedding's program and its cost (embedding_program.h, layer_cost.h's
// LayerKind::kEmbedding), checked against Megatron-LM's vocabulary-parallel embedding
// worked by hand: each tp rank looks up its rows and the partial [mb, seq, hidden] rows
// are summed over tp (an all_reduce of mb x seq x hidden x 2 bytes in bf16; with sequence
// parallelism a reduce_scatter of the same operand), and the table is never gathered.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "search/plan/embedding_program.h"
#include "search/plan/layer_cost.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "sim/hardware.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

int64_t Bytes(Type t) {
  int64_t n = ElementTypeByteWidth(t.element_type());
  for (int64_t d : t.dims()) n *= d;
  return n;
}

// The collectives of `function` (per-device operand types: an spmd body's).
std::vector<const Operation*> Collectives(const Function& function) {
  std::vector<const Operation*> out;
  WalkOps(const_cast<Function&>(function).body(), [&](Operation* op) {
    if (op->Is(OpKind::kAllReduce) || op->Is(OpKind::kReduceScatter) ||
        op->Is(OpKind::kAllGather) || op->Is(OpKind::kAllToAll)) {
      out.push_back(op);
    }
  });
  return out;
}

// The embedding laid out for `layout`, differentiated and partitioned as layer_cost.h
// partitions it.
std::unique_ptr<Module> Partitioned(const ModelSpec& m, const LayerLayout& layout) {
  absl::StatusOr<std::unique_ptr<Module>> module = EmbeddingProgram(m, layout);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<AutodiffPass>(
                   {.func = kEmbedFunction, .seed = AutodiffPassOptions::Seed::kCotangents})}}
          .Then(sharding::PartitionPipeline());
  absl::Status s = RunPipeline(**module, pipeline);
  EXPECT_TRUE(s.ok()) << s;
  return *std::move(module);
}

ModelSpec Gpt() { return *ParseModelSpec("gpt3-1.3b"); }
ModelSpec Llama() { return *ParseModelSpec("llama3-8b,seq=4096"); }

TEST(EmbeddingProgramTest, TheTableIsPaddedAndSplitOverTp) {
  const ModelSpec m = Gpt();  // vocabulary 50,257: one device keeps it unpadded
  absl::StatusOr<std::unique_ptr<Module>> one = SingleDeviceEmbedding(m, 2);
  ASSERT_TRUE(one.ok()) << one.status();
  const Function* f = (*one)->FindFunction(kEmbedFunction);
  ASSERT_NE(f, nullptr);
  // ids, the table and the learned positions (GPT).
  ASSERT_EQ(f->arg_types().size(), 3u);
  EXPECT_EQ(f->arg_types()[0].ToString(), "i32[2, 2048]");
  EXPECT_EQ(f->arg_types()[1].ToString(), "bf16[50257, 2048]");
  EXPECT_EQ(f->arg_types()[2].ToString(), "bf16[2048, 2048]");
  EXPECT_EQ(f->result_types()[0].ToString(), "bf16[2, 2048, 2048]");

  ModelSpec odd = Llama();
  odd.vocabulary = 1000;  // padded to 128 x 4 x 2 = 1024 at tp = 4
  absl::StatusOr<std::unique_ptr<Module>> laid = EmbeddingProgram(odd, {4, 2, true, 1});
  ASSERT_TRUE(laid.ok()) << laid.status();
  const Function* g = (*laid)->FindFunction(kEmbedFunction);
  ASSERT_EQ(g->arg_types().size(), 2u);  // Llama: no learned positions
  EXPECT_EQ(g->arg_types()[0].ToString(), "i32[1, 4096@cp]");
  EXPECT_EQ(g->arg_types()[1].ToString(), "bf16[1024@tp, 4096]");
  EXPECT_EQ(g->result_types()[0].ToString(), "bf16[1, 4096@(cp, tp), 4096]");
}

TEST(EmbeddingProgramTest, VocabularyParallelLookupAllReducesTheRowsOnce) {
  const ModelSpec m = Llama();
  for (int64_t tp : {2, 4, 8}) {
    const int64_t mb = 2;
    std::unique_ptr<Module> module = Partitioned(m, {tp, 1, false, mb});
    ASSERT_NE(module, nullptr);
    const std::vector<const Operation*> forward =
        Collectives(*module->FindFunction(kEmbedFunction));
    ASSERT_EQ(forward.size(), 1u) << "tp=" << tp;
    EXPECT_TRUE(forward[0]->Is(OpKind::kAllReduce));
    EXPECT_EQ(Bytes(forward[0]->operand(0)->type()), mb * m.sequence * m.hidden * 2);
    // The backward scatters the output's gradient into the local rows: no collective.
    EXPECT_EQ(Collectives(*module->FindFunction("embed_grad")).size(), 1u);  // the forward's
  }
}

TEST(EmbeddingProgramTest, SequenceParallelReduceScattersTheRows) {
  const ModelSpec m = Llama();
  const int64_t tp = 4;
  std::unique_ptr<Module> module = Partitioned(m, {tp, 1, true, 1});
  ASSERT_NE(module, nullptr);
  const std::vector<const Operation*> forward = Collectives(*module->FindFunction(kEmbedFunction));
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_TRUE(forward[0]->Is(OpKind::kReduceScatter));
  EXPECT_EQ(Bytes(forward[0]->operand(0)->type()), m.sequence * m.hidden * 2);
  EXPECT_EQ(Bytes(forward[0]->result(0)->type()), m.sequence * m.hidden * 2 / tp);
}

TEST(EmbeddingProgramTest, OneDeviceHasNoCollectives) {
  std::unique_ptr<Module> module = Partitioned(Gpt(), {1, 1, false, 1});
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(Collectives(*module->FindFunction(kEmbedFunction)).empty());
  EXPECT_TRUE(Collectives(*module->FindFunction("embed_grad")).empty());
}

LayerCostOptions H100() {
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = LayerSchedule::None();
  return options;
}

TEST(EmbeddingCostTest, CostedFromTheProgramWithItsAllReduce) {
  const ModelSpec m = Llama();
  absl::StatusOr<LayerCost> one = MeasureLayerCost(m, LayerKind::kEmbedding, {1, 1, false, 1}, H100());
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<LayerCost> tp8 = MeasureLayerCost(m, LayerKind::kEmbedding, {8, 1, false, 1}, H100());
  ASSERT_TRUE(tp8.ok()) << tp8.status();
  EXPECT_GT(one->forward_s, 0);
  EXPECT_GT(one->backward_s, 0);
  EXPECT_EQ(one->forward_exposed_comm_s, 0);
  // The all_reduce of the [1, 4096, 4096] bf16 rows (32 MiB) over 8 NVLink GPUs is not
  // hidden by anything: exposed, and at least its bytes over the NVLink bandwidth.
  const double bytes = 1.0 * m.sequence * m.hidden * 2;
  EXPECT_GT(tp8->forward_exposed_comm_s, 0);
  EXPECT_GE(tp8->forward_s, bytes / H100().predict.hardware.nvlink_bandwidth_per_direction);
  // A lookup moves rows, it does not multiply: no model FLOPs.
  EXPECT_EQ(one->forward_flops, 0);
  // Its backward keeps only the token ids (4 bytes each).
  EXPECT_EQ(one->activation_bytes, m.sequence * 4);
}

}  // namespace
}  // namespace commir::search::plan
