// The collective-matmul schedules on backward passes (the training step's
// backward, partitioned and scheduled). In a gradient function a gathered activation feeds the GEMM that the
// schedules decompose and also the weight gradient X^T dY, which contracts the gathered
// rows and so cannot be computed block by block into output blocks. The schedules
// assemble the gathered value from the blocks they move for such users instead of
// keeping the all_gather beside them (which sent everything twice: the shared block's
// gradient function sent 2365440 bytes per device once scheduled, 1579008 unscheduled).
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

const char* const kSchedules[] = {
    "pipeline-collective-matmul{chunks=2}",
    "pipeline-collective-matmul{chunks=4,streams=2}",
    "ring-collective-matmul",
    "ring-collective-matmul{direction=bi}",
};

struct Collectives {
  int64_t all_gathers = 0;
  int64_t reduce_scatters = 0;
  double bytes = 0;
};

Collectives Count(const Function& function) {
  sharding::FunctionCommReport report = sharding::ComputeCommReport(function);
  Collectives c;
  for (const sharding::CollectiveTotals& t : report.collectives) {
    if (t.kind == OpKind::kAllGather) c.all_gathers = t.count;
    if (t.kind == OpKind::kReduceScatter) c.reduce_scatters = t.count;
  }
  c.bytes = report.total_bytes();
  return c;
}

// A linear layer's forward and weight gradient on sequence-split rows: x is gathered
// once (after CSE) for both. `weight_gradient_first` puts the gradient's matmul first.
std::string LinearWithWeightGradient(bool weight_gradient_first) {
  const std::string y = "  %y = matmul(%x, %w) : f32[16, 12@tp]\n";
  const std::string dw = "  %dw = matmul(%x, %dy) {transpose_a} : f32[8, 12@tp]\n";
  return absl::StrCat(R"(mesh @m(tp=4)
func @f(%x: f32[16@tp, 8], %w: f32[8, 12@tp], %dy: f32[16, 12@tp]) -> (f32[16, 12@tp], f32[8, 12@tp]) {
)",
                      weight_gradient_first ? dw + y : y + dw, R"(  return %y, %dw
}
)");
}

TEST(BackwardCollectiveMatmul, WeightGradientReadsTheAssembledGather) {
  for (const char* schedule : kSchedules) {
    SCOPED_TRACE(schedule);
    absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
        LinearWithWeightGradient(false), "f", {.seed = 3, .pipeline = schedule});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    const Function& f = *check->module->FindFunction("f");
    // The pipeline gathers chunk by chunk in its loop, the ring shifts blocks: no whole
    // all_gather is left beside them.
    int top_level_gathers = 0;
    for (const Operation* op : *f.body()) top_level_gathers += op->Is(OpKind::kAllGather);
    EXPECT_EQ(top_level_gathers, 0) << check->lowered;
    // As many bytes as the unscheduled plan's one all_gather of x: 3/4 of 16 x 8 floats.
    EXPECT_DOUBLE_EQ(Count(f).bytes, 16 * 8 * 4 * 3 / 4.0) << check->lowered;
  }
}

// A user before the schedule's loop cannot read what the loop assembles: it keeps the
// all_gather (and the schedule its own blocks), still computing the same values.
TEST(BackwardCollectiveMatmul, AnEarlierUserKeepsTheAllGather) {
  for (const char* schedule : kSchedules) {
    SCOPED_TRACE(schedule);
    absl::StatusOr<commir::testing::SpmdCheck> check =
        commir::testing::CheckSpmd(LinearWithWeightGradient(true), "f", {.seed = 3, .pipeline = schedule});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    const Function& f = *check->module->FindFunction("f");
    int top_level_gathers = 0;
    for (const Operation* op : *f.body()) top_level_gathers += op->Is(OpKind::kAllGather);
    EXPECT_EQ(top_level_gathers, 1) << check->lowered;
  }
}

// The shared transformer block's gradient function (tp=4): every schedule keeps its
// communication at the unscheduled plan's bytes and rewrites each all_gather and
// reduce_scatter (forward and backward); the 4-chunk pipeline and the bidirectional ring
// are run against one device.
TEST(BackwardCollectiveMatmul, SharedBlockGradientScheduledMatchesOneDevice) {
  std::ifstream in("testdata/examples/transformer_block.commir");
  ASSERT_TRUE(in) << "cannot read testdata/examples/transformer_block.commir";
  std::stringstream text;
  text << in.rdbuf();
  std::unique_ptr<Module> module = testing::ParseForTest(text.str());
  ASSERT_NE(module, nullptr);
  AutodiffOptions options;
  options.seed_cotangents = true;
  ASSERT_TRUE(Differentiate(*module, *module->FindFunction("block"), options).ok());
  const std::string with_grad = PrintModule(*module);

  // The unscheduled plan, lowered only (running it is gradient_partition_test's job).
  std::unique_ptr<Module> plain = testing::ParseForTest(with_grad);
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(commir::testing::RunDefaultSpmdPipeline(*plain).ok());
  const Collectives unscheduled = Count(*plain->FindFunction("block_grad"));
  EXPECT_EQ(unscheduled.all_gathers, 4);
  EXPECT_EQ(unscheduled.reduce_scatters, 4);

  // Every schedule, lowered and rewritten only.
  for (const char* schedule : kSchedules) {
    SCOPED_TRACE(schedule);
    std::unique_ptr<Module> scheduled = testing::ParseForTest(with_grad);
    ASSERT_NE(scheduled, nullptr);
    ASSERT_TRUE(commir::testing::RunDefaultSpmdPipeline(*scheduled).ok());
    ASSERT_TRUE(commir::testing::ApplyPassPipeline(schedule, *scheduled).ok());
    const Function& grad = *scheduled->FindFunction("block_grad");
    EXPECT_DOUBLE_EQ(Count(grad).bytes, unscheduled.bytes);
    int top_level = 0;
    for (const Operation* op : *grad.body()) {
      top_level += op->Is(OpKind::kAllGather) || op->Is(OpKind::kReduceScatter);
    }
    EXPECT_EQ(top_level, 0);
  }

  // Two of them run (each run of the block costs seconds under ASan); the other two run
  // on the small programs above and in collective_matmul_test.
  for (const char* schedule :
       {"pipeline-collective-matmul{chunks=4,streams=2}", "ring-collective-matmul{direction=bi}"}) {
    SCOPED_TRACE(schedule);
    absl::StatusOr<commir::testing::SpmdCheck> check =
        commir::testing::CheckSpmd(with_grad, "block_grad", {.seed = 5, .pipeline = schedule});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    const Function& grad = *check->module->FindFunction("block_grad");
    Collectives scheduled = Count(grad);
    EXPECT_DOUBLE_EQ(scheduled.bytes, unscheduled.bytes) << check->lowered;
    // Every all_gather and reduce_scatter is rewritten, the reduce_scatter of q, k and
    // v's summed input gradients included.
    int top_level = 0;
    for (const Operation* op : *grad.body()) {
      top_level += op->Is(OpKind::kAllGather) || op->Is(OpKind::kReduceScatter);
    }
    EXPECT_EQ(top_level, 0) << check->lowered;
  }
}

}  // namespace
}  // namespace commir::schedules
