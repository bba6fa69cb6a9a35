// What the sim predicts for a combined program: one collective of the summed bytes in
// place of one per gradient, so a step with many small gradients gets faster by about
// (members - 1) x an all_reduce's latency (NCCL's tuning model: calibration.md, base
// latency plus a per-step NVLink latency per protocol), less the concat and slice
// kernels the bucket adds.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "sim/collective_op.h"
#include "sim/collective_time.h"
#include "sim/hardware.h"
#include "sim/op_time.h"
#include "sim/predict.h"
#include "transforms/collectives/combine_all_reduces.h"
#include "transforms/test_util.h"

namespace commir::collectives {
namespace {

constexpr int kGradients = 8;
constexpr int kDevices = 8;

// kGradients updates of 256 floats (1 KiB) on 8 data-parallel devices, each gradient
// all-reduced right before its update, as lower-to-spmd emits them.
std::string Step() {
  std::string args, results, body, returns;
  for (int i = 0; i < kGradients; ++i) {
    absl::StrAppend(&args, i == 0 ? "" : ", ", "%w", i, ": f32[256], %g", i, ": f32[256]");
    absl::StrAppend(&results, i == 0 ? "" : ", ", "f32[256]");
    absl::StrAppend(&body, "  %s", i, " = mul(%g", i, ", 0.1) : f32[256]\n", "  %r", i,
                    " = all_reduce(%s", i, ") {axis = dp} : f32[256]\n", "  %u", i,
                    " = sub(%w", i, ", %r", i, ") : f32[256]\n");
    absl::StrAppend(&returns, i == 0 ? "" : ", ", "%u", i);
  }
  return absl::StrCat("mesh @m(dp=", kDevices, ")\n\nspmd func @f(", args, ") -> (", results,
                      ") on @m {\n", body, "  return ", returns, "\n}\n");
}

double CollectiveSeconds(const sim::HardwareSpec& hw, const Operation& op, const Function& f) {
  absl::StatusOr<sim::CollectiveEstimate> e = sim::EstimateCollectiveOp(hw, op, f, 0, kDevices);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? e->seconds : 0;
}

TEST(CombineAllReducesSimTest, OneCollectiveOfTheSummedBytesSavesTheOthersLatency) {
  const sim::HardwareSpec hw = *sim::FindBuiltinHardware("h100-sxm");
  std::unique_ptr<Module> apart = testing::ParseForTest(Step());
  ASSERT_NE(apart, nullptr);
  std::unique_ptr<Module> together = apart->Clone();
  Function& f_apart = *apart->FindFunction("f");
  Function& f_together = *together->FindFunction("f");
  absl::StatusOr<CombineCounts> counts = CombineAllReduces(f_together, kDefaultThresholdBytes);
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->buckets, 1);
  ASSERT_TRUE(VerifyModule(*together).ok());

  sim::PredictOptions options;
  options.hardware = hw;
  options.record_timeline = true;
  absl::StatusOr<sim::Prediction> before = sim::Predict(f_apart, options);
  absl::StatusOr<sim::Prediction> after = sim::Predict(f_together, options);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(after.ok()) << after.status();

  // What the rewrite removed and what it added, each priced alone: the members'
  // all_reduces; the combined one, the concat and the slices (reshapes are views).
  double removed = 0;
  double added = 0;
  double combined_ar = 0;
  double copies = 0;
  for (Operation* op : *f_apart.body()) {
    if (op->Is(OpKind::kAllReduce)) removed += CollectiveSeconds(hw, *op, f_apart);
  }
  for (Operation* op : *f_together.body()) {
    if (op->Is(OpKind::kAllReduce)) {
      EXPECT_EQ(op->operand(0)->type().num_elements(), 256 * kGradients);
      combined_ar = CollectiveSeconds(hw, *op, f_together);
    } else if (op->Is(OpKind::kConcat) || op->Is(OpKind::kSlice)) {
      absl::StatusOr<double> t = sim::OpTime(hw, *op, f_together);
      ASSERT_TRUE(t.ok()) << t.status();
      copies += *t;
    }
  }
  added = combined_ar + copies;

  // The timeline runs one all_reduce event per device, as long as one collective of
  // all the members' bytes.
  int events = 0;
  for (const sim::TimelineEvent& e : after->timeline) {
    if (e.device != 0 || e.op != "all_reduce") continue;
    ++events;
    EXPECT_NEAR((e.end_us - e.start_us) * 1e-6, combined_ar, 1e-12);
  }
  EXPECT_EQ(events, 1);

  // Everything is on one stream, so each prediction is the sum of its kernels: the
  // difference is exactly what was removed less what was added.
  const double saved = before->time_s - after->time_s;
  EXPECT_NEAR(saved, removed - added, 1e-12);

  // Against NCCL's latencies in the hardware description: an all_reduce inside one node
  // costs at least the least of NVLS's latency and a ring's base latency plus 2(n-1)
  // NVLink steps, for any protocol; the bucket saves (members - 1) of those, less its
  // copies.
  double latency = hw.nvls ? hw.nccl_nvls_latency_s : 1.0;
  for (int p = 0; p < sim::kNumNcclProtocols; ++p) {
    latency = std::min(latency, hw.nccl_base_latency_s[p] +
                                    2 * (kDevices - 1) * hw.nccl_nvlink_step_latency_s[p]);
  }
  EXPECT_GE(saved, (kGradients - 1) * latency - copies);
  // Small gradients: nearly all of an all_reduce's time is its fixed cost, so the
  // combined one takes barely longer than one member.
  EXPECT_LT(combined_ar, 1.1 * removed / kGradients);
  EXPECT_LT(after->time_s, before->time_s);
  RecordProperty("before_us", absl::StrCat(before->time_s * 1e6));
  RecordProperty("after_us", absl::StrCat(after->time_s * 1e6));
  RecordProperty("latency_us", absl::StrCat(latency * 1e6));
  std::cout << "predicted step: " << before->time_s * 1e6 << " us with " << kGradients
            << " all_reduces, " << after->time_s * 1e6 << " us with one; saved "
            << saved * 1e6 << " us; NCCL latency bound " << latency * 1e6
            << " us; bucket copies " << copies * 1e6 << " us\n";
}

}  // namespace
}  // namespace commir::collectives
