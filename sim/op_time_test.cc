#include "sim/op_time.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }
constexpr double kLaunch = 3e-6;  // H100's kernel launch overhead
constexpr double kHbm = 3.35e12;

// Parses a module whose first function's first op is the op under test.
class OpTimeTest : public ::testing::Test {
 protected:
  const Operation& FirstOp(const std::string& source) {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    function_ = module_->functions().front();
    return **function_->body()->begin();
  }
  double Time(const std::string& source, const HardwareSpec& hw = H100()) {
    const Operation& op = FirstOp(source);
    absl::StatusOr<double> t = OpTime(hw, op, *function_);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : -1;
  }

  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
};

TEST(WaveEfficiencyTest, OneTileTooManyHalvesTheEfficiency) {
  EXPECT_DOUBLE_EQ(WaveEfficiency(132, 132), 1.0);
  EXPECT_DOUBLE_EQ(WaveEfficiency(264, 132), 1.0);
  EXPECT_DOUBLE_EQ(WaveEfficiency(133, 132), 133.0 / 264.0);  // ~50%
  EXPECT_DOUBLE_EQ(WaveEfficiency(66, 132), 0.5);
}

TEST(GemmTileEfficiencyTest, WaveAndTileQuantization) {
  const HardwareSpec& hw = H100();
  // 133 x 1 tiles of 128x128 (or 67 of 256x128, half of the last one empty): 2 waves.
  EXPECT_NEAR(GemmTileEfficiency(hw, 1, 133 * 128, 128), 133.0 / 264.0, 1e-12);
  // 8192^2 outputs: 2048 tiles of 128x256 in 16 waves of 132.
  EXPECT_NEAR(GemmTileEfficiency(hw, 1, 8192, 8192), 2048.0 / 2112.0, 1e-12);
  // Batch dims add tiles: 132 batches of one 128x128 tile fill one wave exactly.
  EXPECT_NEAR(GemmTileEfficiency(hw, 132, 128, 128), 1.0, 1e-12);
}

TEST_F(OpTimeTest, LargeBf16GemmReachesTheMeasuredThroughput) {
  double t = Time(R"(func @f(%a: bf16[8192, 8192], %b: bf16[8192, 8192]) -> bf16[8192, 8192] {
    %c = matmul(%a, %b)
    return %c
  })");
  double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_NEAR(t, kLaunch + flops / (989e12 * 0.8 * (2048.0 / 2112.0)), 1e-12);
  // calibration.md: cuBLAS reaches 750-800 TFLOP/s on this shape.
  EXPECT_GT(flops / t, 750e12);
  EXPECT_LT(flops / t, 800e12);
}

TEST_F(OpTimeTest, BatchedGemmCountsBatchTiles) {
  // 4 batches of 1024x1024: 4 x 32 tiles of 128x256 = 128 tiles in one wave of 132.
  double t = Time(R"(func @f(%a: bf16[4, 1024, 4096], %b: bf16[4, 4096, 1024]) -> bf16[4, 1024, 1024] {
    %c = matmul(%a, %b)
    return %c
  })");
  double flops = 2.0 * 4 * 1024 * 1024 * 4096;
  EXPECT_NEAR(t, kLaunch + flops / (989e12 * 0.8 * (128.0 / 132.0)), 1e-12);
}

TEST_F(OpTimeTest, SmallKGemmIsMemoryBound) {
  double t = Time(R"(func @f(%a: bf16[8192, 64], %b: bf16[64, 8192]) -> bf16[8192, 8192] {
    %c = matmul(%a, %b)
    return %c
  })");
  double bytes = 2.0 * (8192 * 64 * 2) + 8192.0 * 8192 * 2;
  EXPECT_NEAR(t, kLaunch + bytes / kHbm, 1e-12);
}

TEST_F(OpTimeTest, F32GemmRunsOnPlainF32UnlessTf32IsOn) {
  const std::string program = R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = matmul(%a, %b)
    return %c
  })";
  double flops = 2.0 * 4096 * 4096 * 4096;
  double eff = GemmTileEfficiency(H100(), 1, 4096, 4096);
  EXPECT_NEAR(Time(program), kLaunch + flops / (67e12 * 0.8 * eff), 1e-12);
  HardwareSpec tf32 = H100();
  tf32.f32_matmul_uses_tf32 = true;
  EXPECT_NEAR(Time(program, tf32), kLaunch + flops / (495e12 * 0.8 * eff), 1e-12);
}

TEST_F(OpTimeTest, ElementwiseAddIsBytesOverHbmPlusLaunch) {
  double t = Time(R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = add(%a, %b)
    return %c
  })");
  EXPECT_NEAR(t, kLaunch + 3.0 * 4096 * 4096 * 4 / kHbm, 1e-12);
  // H200's faster HBM.
  double t200 = Time(R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = add(%a, %b)
    return %c
  })", *FindBuiltinHardware("h200"));
  EXPECT_NEAR(t200, kLaunch + 3.0 * 4096 * 4096 * 4 / 4.8e12, 1e-12);
}

TEST_F(OpTimeTest, SoftmaxIsMemoryBound) {
  double t = Time(R"(func @f(%a: bf16[8, 4096, 4096]) -> bf16[8, 4096, 4096] {
    %c = softmax(%a)
    return %c
  })");
  EXPECT_NEAR(t, kLaunch + 2.0 * 8 * 4096 * 4096 * 2 / kHbm, 1e-12);
}

constexpr char kGqaCausalAttention[] = R"(
func @f(%q: bf16[1, 32, 4096, 128], %k: bf16[1, 8, 4096, 128], %v: bf16[1, 8, 4096, 128]) -> bf16[1, 32, 4096, 128] {
  %o = attention(%q, %k, %v) {causal}
  return %o
})";

// Default positions, queries and keys aligned: query tile t (of 32) walks t + 1 key blocks
// of 128 plus the CTA's fixed cost; 32 heads x 32 tiles = 1024 CTAs in waves of 132 SMs.
TEST_F(OpTimeTest, CausalGqaAttention) {
  double t = Time(kGqaCausalAttention);
  const HardwareSpec& hw = H100();
  const double block_s = 128.0 * 128 * 2 * (128 + 128) * 132 / (989e12 * hw.attention_peak_fraction);
  const double blocks = 32 * (32 * hw.attention_tile_overhead_blocks + 32 * 33 / 2.0);
  EXPECT_NEAR(t, kLaunch + blocks * block_s / (132 * (1024.0 / 1056.0)), 1e-12);
}

// Without the mask every tile walks all 32 blocks: the causal kernel takes
// (32 c + 528) / (32 c + 1024) of it, a little over half.
TEST_F(OpTimeTest, CausalMaskSkipsTheBlocksAfterTheDiagonal) {
  double causal = Time(kGqaCausalAttention) - kLaunch;
  std::string full = kGqaCausalAttention;
  full.replace(full.find(" {causal}"), 9, "");
  const double c = H100().attention_tile_overhead_blocks;
  EXPECT_NEAR(causal / (Time(full) - kLaunch), (32 * c + 528) / (32 * c + 1024), 1e-12);
}

TEST_F(OpTimeTest, ViewsAndLoopsLaunchNothing) {
  EXPECT_EQ(Time(R"(func @f(%a: f32[64, 64]) -> f32[4096] {
    %c = reshape(%a) : f32[4096]
    return %c
  })"), 0);
}

TEST_F(OpTimeTest, CollectivesAreAnError) {
  const Operation& op = FirstOp(R"(mesh @m(tp=8)
spmd func @f(%a: f32[16, 4]) -> f32[128, 4] {
  %b = all_gather(%a) {axis = tp, dim = 0} : f32[128, 4]
  return %b
})");
  absl::StatusOr<double> t = OpTime(H100(), op, *function_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "'all_gather' is a collective: its time depends on its device group (EstimateCollective)");
}

}  // namespace
}  // namespace commir::sim
