#include "sim/gemm_time.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }
const HardwareSpec& H200() { return *FindBuiltinHardware("h200"); }

struct Measured {
  double batch;
  int64_t m, n, k;
  double tflops;
};

GemmShape Bf16(double batch, int64_t m, int64_t n, int64_t k) {
  GemmShape s;
  s.batch = batch;
  s.m = m;
  s.n = n;
  s.k = k;
  s.type = ElementType::kBF16;
  s.operand_bytes = 2.0 * batch * (static_cast<double>(m) * k + static_cast<double>(k) * n);
  s.result_element_bytes = 2;
  return s;
}

double PredictedTflops(const HardwareSpec& hw, const Measured& row) {
  absl::StatusOr<double> t = GemmTime(hw, Bf16(row.batch, row.m, row.n, row.k));
  EXPECT_TRUE(t.ok()) << t.status();
  return 2.0 * row.batch * row.m * row.n * row.k / *t / 1e12;
}

// sim/testdata/xla_sm90_bf16_gemm.txt: XLA's measured sm_90 table (its source is in the
// file's header).
std::vector<Measured> XlaTable() {
  std::ifstream in("sim/testdata/xla_sm90_bf16_gemm.txt");
  EXPECT_TRUE(in.good()) << "cannot open the table";
  std::vector<Measured> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Measured r;
    EXPECT_TRUE(static_cast<bool>(fields >> r.batch >> r.m >> r.n >> r.k >> r.tflops)) << line;
    rows.push_back(r);
  }
  return rows;
}

// Two shapes the old efficiency formula mispriced (small M, small K), measured
// (calibration.md, XLA's table): it gave 169 and 602 TFLOP/s.
TEST(GemmTimeTest, SmallMAndSmallKShapesFollowTheMeasurements) {
  double small_m = PredictedTflops(H100(), {1, 256, 2048, 4096, 285.9});
  double small_k = PredictedTflops(H100(), {1, 4096, 4096, 256, 392.2});
  EXPECT_NEAR(small_m, 285.9, 0.15 * 285.9);
  EXPECT_NEAR(small_k, 392.2, 0.15 * 392.2);
}

// The other rows calibration.md quotes from the same table, within 10%.
TEST(GemmTimeTest, QuotedRowsOfTheXlaTable) {
  const Measured rows[] = {{1, 4096, 4096, 4096, 783.3},
                           {2, 4096, 4096, 2048, 763.0},
                           {1, 2048, 2048, 2048, 632.0},
                           {1, 1024, 2048, 2048, 524.3}};
  for (const Measured& r : rows) {
    EXPECT_NEAR(PredictedTflops(H100(), r), r.tflops, 0.10 * r.tflops)
        << r.batch << "x" << r.m << "x" << r.n << "x" << r.k;
  }
}

// Every row of XLA's table (375 shapes, batch 1-4, dims 256-4096). Bounds:
//  * mean absolute percentage error <= 5%: analytical models reach 3-4% on whole
//    training steps (calibration.md); the model reaches 3.9%. The old efficiency formula scored 24.8% (max 75%).
//  * 95% of the rows within 12%.
//  * no row beyond 35%: the worst rows are tiny split-K shapes (256 x 256 x 4096, 6 us)
//    where cuBLASLt's heuristic picks differently for neighbouring shapes (256x256x4096
//    runs at 84 TFLOP/s, 512x256x4096 at 91 with twice the work) and a time-minimizing
//    choice cannot follow both.
TEST(GemmTimeTest, FollowsXlasMeasuredH100Table) {
  std::vector<Measured> rows = XlaTable();
  ASSERT_EQ(rows.size(), 375u);
  std::vector<double> errors;
  double sum = 0;
  for (const Measured& r : rows) {
    double e = std::abs(PredictedTflops(H100(), r) - r.tflops) / r.tflops;
    errors.push_back(e);
    sum += e;
    EXPECT_LE(e, 0.35) << absl::StrFormat("%gx%dx%dx%d measured %.1f", r.batch, r.m, r.n, r.k,
                                          r.tflops);
  }
  std::sort(errors.begin(), errors.end());
  double mape = sum / rows.size();
  double p95 = errors[static_cast<size_t>(0.95 * errors.size())];
  EXPECT_LE(mape, 0.05) << "mean absolute percentage error";
  EXPECT_LE(p95, 0.12) << "95th percentile error";
}

// Measured on an H200 through the cuda backend's cuBLASLt (bf16, TFLOP/s): bigger shapes
// than XLA's table. Within 6%: the model is ~3% high on 8192^3 and ~4% low on
// 8192 x 4096 x 4096 and 8192 x 6144 x 4096.
TEST(GemmTimeTest, LargeShapesOnH200) {
  const Measured rows[] = {{1, 8192, 8192, 8192, 776.5},
                           {1, 4096, 14336, 4096, 782.1},
                           {1, 4096, 4096, 14336, 822.3},
                           {1, 8192, 4096, 4096, 808.2},
                           {1, 8192, 6144, 4096, 813.3}};
  for (const Measured& r : rows) {
    EXPECT_NEAR(PredictedTflops(H200(), r), r.tflops, 0.06 * r.tflops)
        << r.m << "x" << r.n << "x" << r.k;
  }
}

// The formula by hand for 8192^3 bf16 on H100: 128x256 tiles, no split, 2048 CTAs in 16
// waves of 132; compute-bound, so the time is the main loop plus latencies.
TEST(GemmTimeTest, ClosedFormOfALargeGemm) {
  const HardwareSpec& hw = H100();
  absl::StatusOr<GemmPlan> plan = PlanGemm(hw, Bf16(1, 8192, 8192, 8192), hw.sm_count);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->split_k, 1);
  EXPECT_EQ(plan->tile.m * plan->tile.n, 128 * 256);
  EXPECT_EQ(plan->ctas, 2048);
  EXPECT_EQ(plan->waves, 16);
  double per_sm = 989e12 / 132 * 0.86;
  double main_loop = 16 * 2.0 * 128 * 256 * 8192 / per_sm;
  double last_epilogue = 132 * 128 * 256 * 2 / 3.35e12;
  double expected = 3e-6 + 16 * 2e-6 + main_loop + last_epilogue;
  EXPECT_NEAR(plan->time_s, expected, 1e-12);
}

// A GEMM too small in M and N to fill the SMs splits K: 256 x 2048 has 16 tiles of
// 128x256 for 132 SMs.
TEST(GemmTimeTest, FewTilesAndLongKSplitK) {
  const HardwareSpec& hw = H100();
  absl::StatusOr<GemmPlan> plan = PlanGemm(hw, Bf16(1, 256, 2048, 16384), hw.sm_count);
  ASSERT_TRUE(plan.ok());
  EXPECT_GT(plan->split_k, 1);
  // And never splits a K of a single k-block pair.
  plan = PlanGemm(hw, Bf16(1, 256, 256, 64), hw.sm_count);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->split_k, 1);
}

// The plan's pruned search finds what pricing every candidate finds, over all of XLA's
// shapes and on a part of the SMs.
TEST(GemmTimeTest, PlanEqualsTheBruteForceMinimum) {
  const HardwareSpec& hw = H100();
  for (const Measured& r : XlaTable()) {
    GemmShape shape = Bf16(r.batch, r.m, r.n, r.k);
    for (int sms : {132, 100}) {
      double brute = -1;
      for (const GemmTile& tile : kGemmTiles) {
        for (int split = 1; split <= kMaxSplitK; ++split) {
          if (split > 1 && r.k / 64 < split * kMinKBlocksPerSplit) continue;
          double t = GemmCandidateTime(hw, shape, sms, tile, split);
          if (brute < 0 || t < brute) brute = t;
        }
      }
      absl::StatusOr<GemmPlan> plan = PlanGemm(hw, shape, sms);
      ASSERT_TRUE(plan.ok());
      EXPECT_DOUBLE_EQ(plan->time_s, brute) << r.batch << "x" << r.m << "x" << r.n << "x" << r.k;
    }
  }
}

// The chosen kernel is the cheapest candidate, checked against every candidate.
TEST(GemmTimeTest, PlanIsTheFastestCandidate) {
  const HardwareSpec& hw = H100();
  for (const GemmShape& shape : {Bf16(1, 256, 2048, 4096), Bf16(1, 4096, 4096, 256),
                                 Bf16(3, 1000, 3000, 700)}) {
    absl::StatusOr<GemmPlan> plan = PlanGemm(hw, shape, hw.sm_count);
    ASSERT_TRUE(plan.ok());
    for (const GemmTile& tile : kGemmTiles) {
      EXPECT_LE(plan->time_s, GemmCandidateTime(hw, shape, hw.sm_count, tile, 1) + 1e-15);
    }
    EXPECT_NEAR(plan->time_s,
                GemmCandidateTime(hw, shape, hw.sm_count, plan->tile, plan->split_k), 1e-15);
  }
}

// On fewer SMs (a GEMM beside an NCCL kernel): a compute-bound GEMM slows by the SM ratio
// (each SM keeps its speed), one that fits in a single wave on both does not slow at all.
TEST(GemmTimeTest, FewerSms) {
  const HardwareSpec& hw = H100();
  const GemmShape big = Bf16(1, 8192, 8192, 8192);
  absl::StatusOr<GemmPlan> all = PlanGemm(hw, big, 132);
  absl::StatusOr<GemmPlan> part = PlanGemm(hw, big, 112);
  ASSERT_TRUE(all.ok() && part.ok());
  double ratio = part->time_s / all->time_s;
  EXPECT_GT(ratio, 132.0 / 112.0 * 0.97);
  EXPECT_LT(ratio, 132.0 / 112.0 * 1.10);
  // 4 x 2 tiles of 128x256 at K = 16: one short wave either way.
  const GemmShape tiny = Bf16(1, 512, 512, 128);
  absl::StatusOr<GemmPlan> tiny_all = PlanGemm(hw, tiny, 132);
  absl::StatusOr<GemmPlan> tiny_part = PlanGemm(hw, tiny, 100);
  ASSERT_TRUE(tiny_all.ok() && tiny_part.ok());
  EXPECT_DOUBLE_EQ(tiny_part->time_s, tiny_all->time_s);
}

// A memory-bound GEMM (K = 64): its bytes over HBM plus the launch and each wave's
// latency (2048 tiles of 128x256 in 16 waves; the main loop, ~13 us, hides under the
// 40 us of HBM traffic). XLA's table shows the same ratio: 4 x 4096 x 4096 x 256 takes
// 68 us against 43 us of bytes.
TEST(GemmTimeTest, SmallKIsMemoryBound) {
  const HardwareSpec& hw = H100();
  GemmShape shape = Bf16(1, 8192, 8192, 64);
  absl::StatusOr<GemmPlan> plan = PlanGemm(hw, shape, hw.sm_count);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->split_k, 1);
  EXPECT_EQ(plan->waves, 16);
  double bytes = shape.operand_bytes + 8192.0 * 8192 * 2;
  EXPECT_NEAR(plan->time_s, 3e-6 + 16 * 2e-6 + bytes / 3.35e12, 1e-12);
}

TEST(GemmTimeTest, EmptyAndBadShapes) {
  const HardwareSpec& hw = H100();
  absl::StatusOr<GemmPlan> empty = PlanGemm(hw, Bf16(1, 0, 4096, 4096), 132);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->time_s, 0);
  EXPECT_EQ(PlanGemm(hw, Bf16(1, 64, 64, 64), 0).status().message(),
            "a GEMM on 0 SMs: h100-sxm has 1 to 132");
  EXPECT_EQ(PlanGemm(hw, Bf16(1, 64, 64, 64), 133).status().message(),
            "a GEMM on 133 SMs: h100-sxm has 1 to 132");
  EXPECT_FALSE(PlanGemm(hw, Bf16(1, -1, 64, 64), 132).ok());
  // Sizes far beyond memory stay finite (no overflow: counts are doubles).
  absl::StatusOr<GemmPlan> huge = PlanGemm(hw, Bf16(1e6, int64_t{1} << 40, 1 << 20, 1 << 20), 132);
  ASSERT_TRUE(huge.ok());
  EXPECT_TRUE(std::isfinite(huge->time_s));
}

}  // namespace
}  // namespace commir::sim
