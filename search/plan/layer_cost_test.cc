#include "search/plan/layer_cost.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_cost.h"
#include "sim/hardware.h"
#include "transforms/autodiff/autodiff.h"

namespace commir::search::plan {
namespace {

// Llama-3-8B's layer at sequence 4096: the sim predicts from shapes alone, so real sizes
// cost no more test time than small ones.
ModelSpec Llama8b() { return *ParseModelSpec("llama3-8b,seq=4096"); }

// Plain collectives: these tests check the layer programs' costs, not the schedules
// (layer_schedule_test does).
LayerCostOptions H100() {
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = LayerSchedule::None();
  return options;
}

LayerCost Measure(const ModelSpec& m, LayerKind kind, LayerLayout layout) {
  absl::StatusOr<LayerCost> cost = MeasureLayerCost(m, kind, layout, H100());
  EXPECT_TRUE(cost.ok()) << cost.status();
  return cost.ok() ? *cost : LayerCost{};
}

TEST(LayerCostTest, OneDeviceLayerTimeIsItsFlopsAtAboutGemmSpeed) {
  const ModelSpec m = Llama8b();
  const LayerCost c = Measure(m, LayerKind::kTransformer, {1, 1, false, 1});
  // Forward matmul FLOPs of one sequence: 2 per weight per token, plus causal attention
  // (the sim counts its FLOPs; the bound below only needs the GEMMs).
  const double gemm_flops = 2.0 * (LayerParameters(m) - 2 * m.hidden) * m.sequence;
  EXPECT_GT(c.forward_flops, gemm_flops);
  const double peak = H100().predict.hardware.peak_flops_bf16;
  EXPECT_GT(c.forward_s, gemm_flops / peak);           // never faster than the peak
  EXPECT_LT(c.forward_s, 3 * c.forward_flops / peak);  // nor far from it on big GEMMs
  // The backward does about twice the forward's work.
  EXPECT_GT(c.backward_s, 1.5 * c.forward_s);
  EXPECT_LT(c.backward_s, 3.5 * c.forward_s);
  EXPECT_EQ(c.forward_exposed_comm_s, 0);
  EXPECT_GT(c.selective_recompute_s, 0);
  EXPECT_LT(c.selective_recompute_s, c.forward_s);
  // The layer input: one sequence of hidden bf16 values.
  EXPECT_EQ(c.input_bytes, m.sequence * m.hidden * 2);
  EXPECT_GT(c.activation_bytes, 10 * c.input_bytes);
  EXPECT_GT(c.selective_saved_bytes, 0);
}

TEST(LayerCostTest, TimeAndActivationsFallAsTensorParallelismGrowsInANode) {
  const ModelSpec m = Llama8b();
  LayerCost previous = Measure(m, LayerKind::kTransformer, {1, 1, false, 1});
  for (int64_t tp : {2, 4, 8}) {
    const LayerCost c = Measure(m, LayerKind::kTransformer, {tp, 1, true, 1});
    EXPECT_LT(c.forward_s, previous.forward_s) << "tp=" << tp;
    EXPECT_LT(c.backward_s, previous.backward_s) << "tp=" << tp;
    EXPECT_LT(c.activation_bytes, previous.activation_bytes) << "tp=" << tp;
    EXPECT_GT(c.forward_exposed_comm_s, 0) << "tp=" << tp;  // plain collectives
    EXPECT_EQ(c.input_bytes, m.sequence / tp * m.hidden * 2) << "tp=" << tp;
    previous = c;
  }
}

TEST(LayerCostTest, TimeAndActivationsGrowWithTheMicroBatch) {
  const ModelSpec m = Llama8b();
  const LayerCost one = Measure(m, LayerKind::kTransformer, {2, 1, true, 1});
  const LayerCost two = Measure(m, LayerKind::kTransformer, {2, 1, true, 2});
  EXPECT_GT(two.forward_s, one.forward_s);
  EXPECT_GT(two.backward_s, one.backward_s);
  EXPECT_EQ(two.activation_bytes, 2 * one.activation_bytes);
  EXPECT_EQ(two.input_bytes, 2 * one.input_bytes);
}

TEST(LayerCostTest, SequenceParallelismSplitsTheResidualStream) {
  const ModelSpec m = Llama8b();
  const LayerCost without = Measure(m, LayerKind::kTransformer, {4, 1, false, 1});
  const LayerCost with = Measure(m, LayerKind::kTransformer, {4, 1, true, 1});
  EXPECT_EQ(without.input_bytes, 4 * with.input_bytes);
  EXPECT_LT(with.activation_bytes, without.activation_bytes);
}

TEST(LayerCostTest, ContextParallelismSplitsTheSequence) {
  const ModelSpec m = Llama8b();
  const LayerCost one = Measure(m, LayerKind::kTransformer, {2, 1, true, 1});
  const LayerCost cp = Measure(m, LayerKind::kTransformer, {2, 2, true, 1});
  EXPECT_LT(cp.forward_s, one.forward_s);
  EXPECT_EQ(2 * cp.input_bytes, one.input_bytes);
}

TEST(LayerCostTest, HeadAndGptLayersAreMeasured) {
  const ModelSpec gpt = *ParseModelSpec("gpt3-1.3b");
  const LayerCost layer = Measure(gpt, LayerKind::kTransformer, {2, 1, false, 2});
  EXPECT_GT(layer.forward_s, 0);
  const LayerCost head = Measure(gpt, LayerKind::kHead, {2, 1, true, 2});
  EXPECT_GT(head.forward_s, 0);
  EXPECT_GT(head.backward_s, 0);
  // The logits' matmul alone: 2 x tokens x hidden x padded vocabulary / tp at most peak.
  const double flops =
      2.0 * 2 * gpt.sequence * gpt.hidden * PaddedVocabulary(gpt.vocabulary, 2) / 2;
  EXPECT_GT(head.forward_s, flops / H100().predict.hardware.peak_flops_bf16);
}

// A schedule from the operator search rewrites the partitioned layer before it is
// predicted: collective matmuls hide the tensor-parallel gathers and scatters, ring
// attention the context-parallel key/value gathers.
TEST(LayerCostTest, ScheduleHidesCommunication) {
  const ModelSpec m = Llama8b();
  const LayerCost plain = Measure(m, LayerKind::kTransformer, {4, 1, true, 1});
  LayerCostOptions scheduled = H100();
  scheduled.schedule = *ParseLayerSchedule("pipeline-collective-matmul{chunks=4,streams=2}");
  absl::StatusOr<LayerCost> overlapped =
      MeasureLayerCost(m, LayerKind::kTransformer, {4, 1, true, 1}, scheduled);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status();
  EXPECT_LT(overlapped->forward_exposed_comm_s, plain.forward_exposed_comm_s);
  // Whether the layer gets faster is the operator search's to find out (chunked GEMMs
  // are less efficient and slowed by the overlapping NCCL kernels); here it only matters
  // that the schedule's program is the one predicted.
  EXPECT_NE(overlapped->forward_s, plain.forward_s);

  const LayerCost gathered = Measure(m, LayerKind::kTransformer, {1, 4, false, 1});
  scheduled.schedule = *ParseLayerSchedule("ring-attention");
  absl::StatusOr<LayerCost> ring =
      MeasureLayerCost(m, LayerKind::kTransformer, {1, 4, false, 1}, scheduled);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_LT(ring->forward_exposed_comm_s, gathered.forward_exposed_comm_s);

}

// Ring attention keeps each device's own key/value block and passes the blocks around
// again in the backward (Liu et al., "Ring Attention with Blockwise Transformers", 2023),
// where the plain layer keeps the keys and values gathered over cp: at cp = 4 it keeps
// 3/4 of the gathered k and v less, and everything else alike. The loop's carried
// blocks and running sums are transient (the forward loop's own values).
TEST(LayerCostTest, RingAttentionKeepsItsOwnKeyValueBlocks) {
  const ModelSpec m = Llama8b();
  const LayerLayout cp4{1, 4, false, 1};
  const LayerCost gathered = Measure(m, LayerKind::kTransformer, cp4);
  EXPECT_EQ(gathered.plain, nullptr);  // plain already
  LayerCostOptions ring_options = H100();
  ring_options.schedule = *ParseLayerSchedule("ring-attention");
  absl::StatusOr<LayerCost> ring = MeasureLayerCost(m, LayerKind::kTransformer, cp4, ring_options);
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_EQ(ring->schedule.ToString(), "ring-attention");
  // k and v, gathered: micro-batch x kv heads x the whole sequence x head dim, bf16.
  const int64_t gathered_kv = 2 * (1 * m.kv_heads * m.sequence * (m.hidden / m.heads) * 2);
  EXPECT_EQ(ring->activation_bytes, gathered.activation_bytes - gathered_kv * 3 / 4);
  // Lighter already: no plain variant to fall back to.
  EXPECT_EQ(ring->plain, nullptr);
}

TEST(LayerCostTest, BadLayoutsAreRefusedWithTheLayer) {
  absl::StatusOr<LayerCost> c =
      MeasureLayerCost(Llama8b(), LayerKind::kTransformer, {3, 1, true, 1}, H100());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("layer (tp=3"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("does not divide"), std::string::npos) << c.status();
}

TEST(LayerCostTest, CacheMeasuresEachKeyOnce) {
  LayerCostCache cache(H100());
  const ModelSpec m = Llama8b();
  absl::StatusOr<LayerCost> a = cache.Get(m, LayerKind::kTransformer, {2, 1, true, 1});
  absl::StatusOr<LayerCost> b = cache.Get(m, LayerKind::kTransformer, {2, 1, true, 1});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->forward_s, b->forward_s);
  EXPECT_EQ(cache.measured(), 1);
  ASSERT_TRUE(cache.Get(m, LayerKind::kTransformer, {2, 1, true, 2}).ok());
  EXPECT_EQ(cache.measured(), 2);
}

// The embedding is costed from its program (embedding_program_test checks its
// collectives): on one device a lookup reads a row and writes it per token, so its
// forward takes at least those bytes at the HBM bandwidth, and is far from a layer's.
TEST(LayerCostTest, EmbeddingIsMemoryBound) {
  const ModelSpec m = Llama8b();
  const sim::HardwareSpec hw = H100().predict.hardware;
  const LayerCost e = Measure(m, LayerKind::kEmbedding, {1, 1, false, 1});
  EXPECT_GE(e.forward_s, 2.0 * m.sequence * m.hidden * 2 / hw.hbm_bandwidth);
  EXPECT_LT(e.forward_s, Measure(m, LayerKind::kTransformer, {1, 1, false, 1}).forward_s / 20);
}


// On one device the partitioner changes nothing, so the activations the layer cost
// finds by matching @layer_grad's values to @layer's by name are the ones autodiff says
// by identity its backward reads (the layer input and every intermediate it keeps; not
// the weights, counted as parameters), each tensor once: a reshape or transpose of a
// saved value (the attention output's [s, heads, d] and [heads, s, d] layouts) is the
// same tensor, which FlashAttention reads and writes with strides. Not the layer's
// output: @layer_grad returns it as its forward result, the next layer's input, and the
// backward never reads it (the residual add's derivative needs no values).
TEST(LayerCostTest, OneDeviceActivationsAreAutodiffsSavedValuesEachTensorOnce) {
  for (const char* spec : {"llama3-8b,seq=512", "gpt3-1.3b,seq=512"}) {
    SCOPED_TRACE(spec);
    const ModelSpec m = *ParseModelSpec(spec);
    LayerLayout one;
    absl::StatusOr<std::unique_ptr<Module>> laid_out = TransformerLayerProgram(m, one);
    ASSERT_TRUE(laid_out.ok()) << laid_out.status();
    std::unique_ptr<Module> module = *std::move(laid_out);
    const Function& layer = *module->FindFunction(kLayerFunction);
    AutodiffOptions options;
    options.seed_cotangents = true;
    absl::StatusOr<Gradient> grad = DifferentiateWithSaved(*module, layer, options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    // A forward value that is a reshape or transpose of another saved forward value.
    auto is_view_of_saved = [&](const Value* value) {
      while (value->kind() == Value::Kind::kResult) {
        const Operation* def = value->defining_op();
        if (!def->Is(OpKind::kReshape) && !def->Is(OpKind::kTranspose)) return false;
        value = def->operand(0);
        if (grad->saved.contains(value)) return true;
      }
      return false;
    };
    int64_t saved_bytes = 0;
    for (const auto& [value, reads] : grad->saved) {
      if (value->kind() == Value::Kind::kBlockArgument && value != layer.body()->argument(0)) {
        continue;
      }
      if (is_view_of_saved(value)) continue;
      // Each value of @layer_grad once (an attention's output and its log-sum-exp are two).
      absl::flat_hash_set<const Value*> distinct;
      for (const BackwardRead& read : reads) distinct.insert(read.value);
      for (const Value* v : distinct) {
        saved_bytes += v->type().num_elements() * ElementTypeByteWidth(v->type().element_type());
      }
    }
    EXPECT_FALSE(grad->saved.contains(layer.body()->terminator()->operand(0)));
    EXPECT_EQ(Measure(m, LayerKind::kTransformer, one).activation_bytes, saved_bytes);
  }
}

// The unfused attention (attention=unfused) keeps what Korthikanti et al.'s activation
// formula counts for it: the softmax's output, 2 a s^2 b bytes in bf16 (their 5 a s^2 b
// less the dropout mask and output this layer has not), where the fused op keeps its f32
// log-sum-exp (4 a s b); q, k, v and the attention output are kept either way. Selective
// recomputation drops the probabilities and the output and re-runs the two batched GEMMs
// and the softmax, which takes at least the softmax's two passes over the scores at HBM
// bandwidth and the GEMMs' FLOPs at the peak.
TEST(LayerCostTest, UnfusedAttentionKeepsTheProbabilitiesForSelectiveRecomputation) {
  const ModelSpec flash = *ParseModelSpec("gpt3-1.3b,seq=512");
  const ModelSpec unfused = *ParseModelSpec("gpt3-1.3b,seq=512,attention=unfused");
  const LayerCost f = Measure(flash, LayerKind::kTransformer, {1, 1, false, 1});
  const LayerCost u = Measure(unfused, LayerKind::kTransformer, {1, 1, false, 1});
  const int64_t a = unfused.heads, s = unfused.sequence, h = unfused.hidden, b = 1;
  const int64_t probabilities = 2 * a * s * s * b, lse = 4 * a * s * b;
  EXPECT_EQ(u.activation_bytes - f.activation_bytes, probabilities - lse);
  EXPECT_EQ(u.selective_saved_bytes, probabilities + 2 * s * b * h);
  const sim::HardwareSpec& hw = H100().predict.hardware;
  const double softmax = hw.kernel_launch_overhead_s + 2.0 * probabilities / hw.hbm_bandwidth;
  const double gemms = 2 * (2.0 * b * a * s * s * unfused.head_dim()) / hw.peak_flops_bf16;
  EXPECT_GT(u.selective_recompute_s, softmax + gemms);
  EXPECT_LT(u.selective_recompute_s, u.forward_s);
  EXPECT_GT(u.forward_s, f.forward_s);
  EXPECT_GT(u.backward_s, f.backward_s);
}

// Context parallelism: the weight gradients are partial sums over cp, which Megatron-LM
// reduces once per iteration over dp x cp (pipeline_model.h's data-parallel term), not in
// each micro-batch's layer. An all-reduce of the layer's weights over two GPUs needs at
// least their bytes over one direction's NVLink bandwidth (a ring over 2 moves half the
// bytes each way twice); the layer's whole exposed backward communication at cp = 2 (the
// k/v gathers' gradients) stays under that, which it would not with the weight reduction
// inside (it ran exposed after the backward).
TEST(LayerCostTest, ContextParallelWeightGradientsAreReducedWithDataParallelism) {
  const ModelSpec m = Llama8b();
  const LayerCost c = Measure(m, LayerKind::kTransformer, {1, 2, false, 1});
  const sim::HardwareSpec& hw = H100().predict.hardware;
  const double weight_bytes = 2.0 * static_cast<double>(LayerParameters(m));
  const double all_reduce_floor = weight_bytes / hw.nvlink_bandwidth_per_direction;
  EXPECT_GT(all_reduce_floor, 0);
  EXPECT_LT(c.backward_exposed_comm_s, all_reduce_floor);
}

}  // namespace
}  // namespace commir::search::plan
