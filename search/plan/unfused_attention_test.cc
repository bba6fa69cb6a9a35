// The layer's unfused attention (attention=unfused, layer_program.h): its s x s traffic
// and the sim's price of it against closed forms, what it computes against the fused
// attention op on the cpu backend, and its Megatron layout.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/attribute.h"
#include "commir/ir.h"
#include "commir/op_cost.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"
#include "sim/hardware.h"
#include "sim/op_time.h"

namespace commir::search::plan {
namespace {

using ::testing::HasSubstr;

// Two sequences of 64 tokens, 4 heads of 16: the scores are [2, 4, 64, 64].
constexpr char kSmall[] =
    "name=small,arch=gpt,layers=2,hidden=64,heads=4,kv_heads=4,ffn=256,seq=64,vocab=128,"
    "global_batch=4,attention=unfused";
constexpr int64_t kB = 2, kHeads = 4, kS = 64, kD = 16;

ModelSpec Small(const std::string& extra = "") {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(std::string(kSmall) + extra);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

const Operation* OpNamed(const Function& f, const std::string& result_name) {
  const Operation* found = nullptr;
  WalkOps(f.body(), [&](Operation* op) {
    for (const Value* r : op->results()) {
      if (r->name() == result_name) found = op;
    }
  });
  return found;
}

TEST(UnfusedAttention, TrafficOfTheScoresIsTheirClosedForm) {
  absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(Small(), kB);
  ASSERT_TRUE(layer.ok()) << layer.status();
  const Function& f = *(*layer)->FindFunction(kLayerFunction);
  EXPECT_EQ(OpNamed(f, "oh")->kind(), OpKind::kMatmul);  // no fused attention op
  WalkOps(f.body(), [&](Operation* op) { EXPECT_FALSE(op->Is(OpKind::kAttention)); });

  const double bf16 = 2;
  const double scores = kB * kHeads * kS * kS * bf16;  // one pass over the s x s tensor
  const double head = kB * kHeads * kS * kD * bf16;    // q, k, v or the output
  // q k^T: reads q and k, writes the scores; softmax reads and writes them; probs x v
  // reads them and v and writes the output: 4 passes over the scores in the forward.
  EXPECT_EQ(EstimateOpCost(*OpNamed(f, "scores"), f).bytes_accessed, 2 * head + scores);
  EXPECT_EQ(EstimateOpCost(*OpNamed(f, "probs"), f).bytes_accessed, 2 * scores);
  EXPECT_EQ(EstimateOpCost(*OpNamed(f, "oh"), f).bytes_accessed, scores + 2 * head);
  // FLOPs: two GEMMs of 2 s^2 d per head and sequence, as the fused op counts unmasked.
  EXPECT_EQ(EstimateOpCost(*OpNamed(f, "scores"), f).flops, 2.0 * kB * kHeads * kS * kS * kD);
  EXPECT_EQ(EstimateOpCost(*OpNamed(f, "oh"), f).flops, 2.0 * kB * kHeads * kS * kS * kD);

  // The sim prices the softmax by its bytes at HBM bandwidth (its 5 FLOPs per element at
  // the f32 peak take a tenth of that on an A100): one launch plus 2 passes.
  const sim::HardwareSpec* a100 = sim::FindBuiltinHardware("a100-sxm-80g");
  ASSERT_NE(a100, nullptr);
  const sim::HardwareSpec& hw = *a100;
  absl::StatusOr<double> softmax = sim::OpTime(hw, *OpNamed(f, "probs"), f);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_DOUBLE_EQ(*softmax, hw.kernel_launch_overhead_s + 2 * scores / hw.hbm_bandwidth);
}

// Runs `layer` on the cpu backend with the seeded random inputs of its arguments.
std::vector<runtime::Tensor> RunOnCpu(const Function& layer) {
  std::vector<runtime::Tensor> inputs;
  for (size_t i = 0; i < layer.arg_types().size(); ++i) {
    const Type& t = layer.arg_types()[i];
    inputs.push_back(runtime::RandomGlobalTensor(7, static_cast<int>(i), t.element_type(), t.dims()));
  }
  cpu::CpuBackend backend;
  absl::StatusOr<std::vector<runtime::Tensor>> out =
      runtime::RunWithGlobalTensors(layer, backend, inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<runtime::Tensor>{};
}

TEST(UnfusedAttention, ComputesWhatTheFusedOpComputesWithoutTheMask) {
  // f32, so that the two orders of summation agree to rounding.
  absl::StatusOr<std::unique_ptr<Module>> unfused = SingleDeviceLayer(Small(",dtype=f32"), kB);
  ModelSpec flash_spec = Small(",dtype=f32");
  flash_spec.attention = AttentionKind::kFlash;
  absl::StatusOr<std::unique_ptr<Module>> causal = SingleDeviceLayer(flash_spec, kB);
  absl::StatusOr<std::unique_ptr<Module>> bidirectional = SingleDeviceLayer(flash_spec, kB);
  ASSERT_TRUE(unfused.ok() && causal.ok() && bidirectional.ok());
  // The fused op without its causal mask: what the unfused layer computes (the mask is
  // left out of its values, layer_program.h).
  Function& fused = *(*bidirectional)->FindFunction(kLayerFunction);
  WalkOps(fused.body(), [&](Operation* op) {
    if (op->Is(OpKind::kAttention)) op->mutable_attrs().Set("causal", Attribute::Bool(false));
  });

  const std::vector<runtime::Tensor> got = RunOnCpu(*(*unfused)->FindFunction(kLayerFunction));
  const std::vector<runtime::Tensor> want = RunOnCpu(fused);
  const std::vector<runtime::Tensor> masked = RunOnCpu(*(*causal)->FindFunction(kLayerFunction));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(masked.size(), 1u);
  const runtime::Comparison same = runtime::CompareWithReference("out", got[0], want[0], 1e-5);
  EXPECT_TRUE(same.pass) << runtime::FormatComparison(same);
  // Not vacuous: the causal layer's output differs from it well beyond rounding.
  const runtime::Comparison other = runtime::CompareWithReference("out", got[0], masked[0], 1e-5);
  EXPECT_TRUE(other.comparable);
  EXPECT_GT(other.rel_l2, 1e-3) << runtime::FormatComparison(other);
}

TEST(UnfusedAttention, LaysOutWithHeadsOverTpAndRefusesCp) {
  LayerLayout tp2;
  tp2.tp = 2;
  tp2.sequence_parallel = true;
  tp2.micro_batch = kB;
  absl::StatusOr<std::unique_ptr<Module>> laid_out = TransformerLayerProgram(Small(), tp2);
  ASSERT_TRUE(laid_out.ok()) << laid_out.status();
  // The scores keep the heads split over tp: [b, heads@tp, s, s].
  EXPECT_THAT(PrintModule(**laid_out), HasSubstr("bf16[2, 4@tp, 64, 64]"));

  LayerLayout cp2;
  cp2.cp = 2;
  cp2.micro_batch = kB;
  absl::StatusOr<std::unique_ptr<Module>> refused = TransformerLayerProgram(Small(), cp2);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("attention=unfused has no context parallelism"));
}

TEST(UnfusedAttention, ModelSpecKey) {
  EXPECT_EQ(Small().attention, AttentionKind::kUnfused);
  EXPECT_THAT(FormatModelSpec(Small()), HasSubstr(",attention=unfused"));
  absl::StatusOr<ModelSpec> back = ParseModelSpec(FormatModelSpec(Small()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->attention, AttentionKind::kUnfused);
  // The default is FlashAttention's fused op, and its text is as before the key.
  absl::StatusOr<ModelSpec> flash = ParseModelSpec("gpt3-1.3b");
  ASSERT_TRUE(flash.ok());
  EXPECT_EQ(flash->attention, AttentionKind::kFlash);
  EXPECT_THAT(FormatModelSpec(*flash), ::testing::Not(HasSubstr("attention")));
  EXPECT_THAT(ParseModelSpec("gpt3-1.3b,attention=sdpa").status().message(),
              HasSubstr("attention=sdpa: expected flash or unfused"));
  EXPECT_THAT(ParseModelSpec("llama3-8b,attention=unfused").status().message(),
              HasSubstr("attention=unfused needs kv_heads = heads"));
}

}  // namespace
}  // namespace commir::search::plan
