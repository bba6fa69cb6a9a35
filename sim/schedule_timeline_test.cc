// Timelines of schedules the passes produce from the shared examples.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/predict.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir::sim {
namespace {

std::unique_ptr<Module> LoweredExample(const std::string& name) {
  std::ifstream in("testdata/examples/" + name + ".commir");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text.str(), name);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  EXPECT_TRUE(sharding::PropagateSharding(**module).ok());
  EXPECT_TRUE(sharding::LowerToSpmd(**module).ok());
  return *std::move(module);
}

// ring-collective-matmul (uni) on ag_matmul's 8 devices: n-1 = 7 shifts on stream 1 (the
// peeled last step sends nothing) and 8 block GEMMs, each waiting for its block.
TEST(ScheduleTimelineTest, RingCollectiveMatmulSendsNothingInItsLastStep) {
  std::unique_ptr<Module> module = LoweredExample("ag_matmul");
  ASSERT_NE(module, nullptr);
  absl::StatusOr<int> rewritten = schedules::RingCollectiveMatmul(*module, schedules::RingDirection::kUni);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  ASSERT_EQ(*rewritten, 1);
  PredictOptions options;
  options.hardware = *FindBuiltinHardware("h100-sxm");
  options.record_timeline = true;
  absl::StatusOr<Prediction> p = Predict(*module->functions().front(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->devices.size(), 8u);
  int shifts = 0, matmuls = 0;
  double last_shift_end = 0, last_matmul_start = 0;
  for (const TimelineEvent& e : p->timeline) {
    if (e.device != 0) continue;
    if (e.op == "shift") {
      ++shifts;
      EXPECT_EQ(e.stream, 1);
      last_shift_end = e.end_us;
    }
    if (e.op == "matmul") {
      ++matmuls;
      last_matmul_start = e.start_us;
    }
  }
  EXPECT_EQ(shifts, 7);
  EXPECT_EQ(matmuls, 8);
  // The last GEMM multiplies the block the last shift delivered.
  EXPECT_GE(last_matmul_start, last_shift_end);
  EXPECT_GE(p->time_s * 1e6, last_shift_end);
}

}  // namespace
}  // namespace commir::sim
