// The head with its loss (layer_program.h's HeadProgram) and its cost, against closed
// forms: the logits GEMM's FLOPs (2 x tokens x hidden x padded vocabulary over the tp
// group), and the mean over a cp-split sequence as one scalar all-reduced over cp (the
// per-token losses summed where they are), never the logits gathered over cp.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "search/plan/layer_cost.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "sim/hardware.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/megatron_layout.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

ModelSpec Llama() { return *ParseModelSpec("llama3-8b,seq=4096"); }

LayerCostOptions H100() {
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = LayerSchedule::None();
  return options;
}

TEST(HeadLossTest, ForwardFlopsAreTheLogitsGemm) {
  const ModelSpec m = Llama();
  for (int64_t tp : {1, 2, 8}) {
    const int64_t mb = 2;
    absl::StatusOr<LayerCost> head =
        MeasureLayerCost(m, LayerKind::kHead, {tp, 1, tp > 1, mb}, H100());
    ASSERT_TRUE(head.ok()) << head.status();
    // 2 x tokens x hidden x padded vocabulary, summed over the tp devices; the norm and
    // the loss add a few FLOPs per element, under 0.5% of it at hidden 4096.
    const double gemm = 2.0 * mb * m.sequence * m.hidden * PaddedVocabulary(m.vocabulary, tp);
    EXPECT_GE(head->forward_flops, gemm) << "tp=" << tp;
    EXPECT_LE(head->forward_flops, 1.005 * gemm) << "tp=" << tp;
  }
}

TEST(HeadLossTest, TheMeanOverACpSplitSequenceAllReducesOneScalar) {
  const ModelSpec m = Llama();
  absl::StatusOr<std::unique_ptr<Module>> head = HeadProgram(m, {1, 2, false, 1});
  ASSERT_TRUE(head.ok()) << head.status();
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<AutodiffPass>(
                   {.func = kHeadFunction, .seed = AutodiffPassOptions::Seed::kCotangents})}}
          .Then(sharding::PartitionPipeline());
  ASSERT_TRUE(RunPipeline(**head, pipeline).ok());
  std::vector<const Operation*> collectives;
  WalkOps((*head)->FindFunction(kHeadFunction)->body(), [&](Operation* op) {
    if (op->Is(OpKind::kAllReduce) || op->Is(OpKind::kAllGather) ||
        op->Is(OpKind::kReduceScatter) || op->Is(OpKind::kAllToAll)) {
      collectives.push_back(op);
    }
  });
  ASSERT_EQ(collectives.size(), 1u);
  EXPECT_TRUE(collectives[0]->Is(OpKind::kAllReduce));
  EXPECT_TRUE(collectives[0]->result(0)->type().dims().empty());  // the loss: a scalar
  const Attribute* axis = collectives[0]->attrs().Find("axis");
  ASSERT_NE(axis, nullptr);
  EXPECT_EQ(axis->axes(), AxisList{sharding::kMegatronCpAxis});
}

TEST(HeadLossTest, TheLabelsAreSplitLikeTheSequence) {
  absl::StatusOr<std::unique_ptr<Module>> head = HeadProgram(Llama(), {4, 2, true, 1});
  ASSERT_TRUE(head.ok()) << head.status();
  const Function* f = (*head)->FindFunction(kHeadFunction);
  EXPECT_EQ(f->arg_types().back().ToString(), "i32[1, 4096@cp]");
  EXPECT_EQ(f->result_types()[0].ToString(), "bf16[]");
}

}  // namespace
}  // namespace commir::search::plan
