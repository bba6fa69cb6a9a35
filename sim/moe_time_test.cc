// What the sim prices for an expert-parallel MoE layer, each against a closed form:
//  * the expert GEMMs [E, C, H] x [E, H, F] at small per-expert C are bound by reading
//    the experts' weights (E H F elements) from HBM, at large C by the tensor cores;
//  * the chunks moe-pipeline sends and receives (a dynamic_slice read only by an
//    all_to_all, a dynamic_update_slice of an all_to_all's result) cost no kernel, while
//    the same slice read by an elementwise op is a copy;
//  * load imbalance, written as the capacity factor F (the busiest expert's tokens over
//    the mean; every rank padded to it, as the collectives wait for the busiest): the
//    exchange and the GEMMs of a layer at F = 2 take twice those at F = 1 where they are
//    bandwidth- and compute-bound.
#include <memory>
#include <string>

#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/collective_time.h"
#include "sim/hardware.h"
#include "sim/moe_exchange_views.h"
#include "sim/op_time.h"
#include "sim/placement.h"
#include "sim/predict.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }

std::unique_ptr<Module> Parse(const std::string& source) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? std::move(*module) : nullptr;
}

double FirstOpTime(const std::string& source) {
  std::unique_ptr<Module> module = Parse(source);
  if (module == nullptr) return -1;
  const Function& f = *module->functions().front();
  absl::StatusOr<double> t = OpTime(H100(), **f.body()->begin(), f);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : -1;
}

// DeepSeek-V3's routed experts on one of 8 GPUs: 32 experts of hidden 7168 and width
// 2048, C rows each.
std::string ExpertGemm(int c) {
  return absl::Substitute(R"(func @g(%a: bf16[32, $0, 7168], %w: bf16[32, 7168, 2048]) -> bf16[32, $0, 2048] {
  %y = matmul(%a, %w)
  return %y
}
)",
                          c);
}

TEST(MoeTime, SmallExpertGemmsReadTheWeightsAtHbmSpeed) {
  const double weights = 32.0 * 7168 * 2048 * 2;  // bytes
  for (int c : {16, 32, 64}) {
    SCOPED_TRACE(c);
    const double t = FirstOpTime(ExpertGemm(c));
    // Bound below by the weight read; within 15% of it (the activations, the result and
    // the launch add a little).
    EXPECT_GE(t, weights / H100().hbm_bandwidth);
    EXPECT_LT(t, 1.15 * weights / H100().hbm_bandwidth);
  }
  // At C = 1024 the tensor cores bound it: 2 x 32 x 1024 x 7168 x 2048 FLOPs within
  // 70-90% of the peak (the GEMM model's large-shape efficiency, gemm_time.h).
  const double flops = 2.0 * 32 * 1024 * 7168 * 2048;
  const double rate = flops / FirstOpTime(ExpertGemm(1024)) / H100().peak_flops_bf16;
  EXPECT_GT(rate, 0.7);
  EXPECT_LT(rate, 0.9);
}

TEST(MoeTime, ChunksTheExchangesSendAndReceiveCostNoKernel) {
  std::unique_ptr<Module> module = Parse(R"(mesh @m(ep=8)

spmd func @f(%buf: bf16[256, 4, 32, 7168], %acc: bf16[256, 4, 32, 7168], %i: index) -> (bf16[256, 4, 32, 7168], bf16[256, 1, 32, 7168]) on @m {
  %s = dynamic_slice(%buf, %i) {dim = 1, size = 1} : bf16[256, 1, 32, 7168]
  %c = reshape(%s) : bf16[256, 32, 7168]
  %d = all_to_all(%c) {axis = ep, split_dim = 0, concat_dim = 1, stream = 1} : bf16[32, 256, 7168]
  %back = all_to_all(%d) {axis = ep, split_dim = 1, concat_dim = 0, stream = 2} : bf16[256, 32, 7168]
  %blocks = reshape(%back) : bf16[256, 1, 32, 7168]
  %next = dynamic_update_slice(%acc, %blocks, %i) {dim = 1} : bf16[256, 4, 32, 7168]
  %t = dynamic_slice(%buf, %i) {dim = 1, size = 1} : bf16[256, 1, 32, 7168]
  %u = exp(%t) : bf16[256, 1, 32, 7168]
  return %next, %u
}
)");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->functions().front();
  for (const Operation* op : *f.body()) {
    const std::string name = op->num_results() > 0 ? op->result(0)->name() : "";
    if (name == "s" || name == "next") {
      EXPECT_TRUE(IsExchangeBlockInPlace(*op)) << name;
      absl::StatusOr<double> t = OpTime(H100(), *op, f);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(*t, 0) << name;
    }
    if (name == "t") {
      // Read by an elementwise op: a copy of 256 x 32 x 7168 bf16 elements at least.
      EXPECT_FALSE(IsExchangeBlockInPlace(*op));
      absl::StatusOr<double> t = OpTime(H100(), *op, f);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_GT(*t, 2 * 256.0 * 32 * 7168 * 2 / H100().hbm_bandwidth);
    }
  }
}

// One ep=8 layer's exchange and expert GEMM at capacity factor f (4096 tokens per GPU,
// top-8 of 256 experts: C = 128 f slots per expert and GPU).
std::string EpLayer(double f) {
  const int c = static_cast<int>(128 * f);
  return absl::Substitute(R"(mesh @m(ep=8)

spmd func @f(%buf: bf16[256, $0, 7168], %w: bf16[32, 7168, 2048]) -> bf16[32, $1, 2048] on @m {
  %d = all_to_all(%buf) {axis = ep, split_dim = 0, concat_dim = 1} : bf16[32, $1, 7168]
  %y = matmul(%d, %w) : bf16[32, $1, 2048]
  return %y
}
)",
                          c, 8 * c);
}

TEST(MoeTime, ImbalanceAsCapacityFactorScalesTheExchangeAndTheGemms) {
  auto predict = [](double f) {
    std::unique_ptr<Module> module = Parse(EpLayer(f));
    PredictOptions options;
    options.hardware = H100();
    options.record_timeline = true;
    absl::StatusOr<Prediction> p = Predict(*module->functions().front(), options);
    EXPECT_TRUE(p.ok()) << p.status();
    double a2a = 0, gemm = 0;
    for (const TimelineEvent& e : p->timeline) {
      if (e.device != 0) continue;
      (e.op == "all_to_all" ? a2a : gemm) += (e.end_us - e.start_us) * 1e-6;
    }
    return std::make_pair(a2a, gemm);
  };
  const auto [a2a1, gemm1] = predict(1.0);
  const auto [a2a2, gemm2] = predict(2.0);
  // The exchange: 256 x 128 f x 7168 bf16 per GPU, 7/8 of it leaving the GPU at 0.71 of
  // NVLink times the size efficiency, after NCCL's Simple latency of 8.4 us + 7 steps of
  // 3.4 us (collective_time.h's closed form).
  auto exchange = [](double f) {
    const double bytes = 256.0 * 128 * f * 7168 * 2;
    const double efficiency = bytes / (bytes + 0.75 * 1024 * 1024);
    return 8.4e-6 + 7 * 3.4e-6 + bytes * 7 / 8 / (450e9 * 0.71 * efficiency);
  };
  EXPECT_NEAR(a2a1 / exchange(1), 1, 0.005);
  EXPECT_NEAR(a2a2 / exchange(2), 1, 0.005);
  EXPECT_NEAR(a2a2 / a2a1, 2, 0.03);
  // The GEMMs at 1024 and 2048 rows per expert: compute-bound, twice the FLOPs.
  EXPECT_NEAR(gemm2 / gemm1, 2, 0.1);
}

}  // namespace
}  // namespace commir::sim
