// Timelines of schedules the passes produce from the shared examples.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/collective_op.h"
#include "sim/op_time.h"
#include "sim/predict.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir::sim {
namespace {

std::string ReadExample(const std::string& name) {
  std::ifstream in("testdata/examples/" + name + ".commir");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<Module> LoweredProgram(const std::string& text, const std::string& name) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, name);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  EXPECT_TRUE(sharding::PropagateSharding(**module).ok());
  EXPECT_TRUE(sharding::LowerToSpmd(**module).ok());
  return *std::move(module);
}

std::unique_ptr<Module> LoweredExample(const std::string& name) {
  return LoweredProgram(ReadExample(name), name);
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


// ring-attention on attention's backward (8 heads, 8192 keys over 4 devices, so a step's
// compute outlasts its four transfers): the lowering's all_gathers and reduce_scatters run on the main stream
// with nothing beside them; the ring's k/v shifts and its dk/dv shifts (but the last
// step's, going home) run on stream 1 under the steps' attention and attention_grad.
TEST(ScheduleTimelineTest, RingAttentionGradHidesItsTransfersUnderTheSteps) {
  constexpr char kProgram[] = R"(mesh @m(sp=4)
func @attn_grad(%q: f32[1, 8, 8192@sp, 128], %k: f32[1, 8, 8192@sp, 128], %v: f32[1, 8, 8192@sp, 128], %do: f32[1, 8, 8192@sp, 128], %o: f32[1, 8, 8192@sp, 128], %lse: f32[1, 8, 8192@sp]) -> (f32[1, 8, 8192@sp, 128], f32[1, 8, 8192@sp, 128], f32[1, 8, 8192@sp, 128]) {
  %dq, %dk, %dv = attention_grad(%q, %k, %v, %o, %lse, %do) {causal}
  return %dq, %dk, %dv
}
)";
  PredictOptions options;
  options.hardware = *FindBuiltinHardware("h100-sxm");
  options.record_timeline = true;
  std::unique_ptr<Module> gathered = LoweredProgram(kProgram, "attn_grad");
  std::unique_ptr<Module> ring = LoweredProgram(kProgram, "attn_grad");
  ASSERT_NE(gathered, nullptr);
  ASSERT_NE(ring, nullptr);
  ASSERT_TRUE(schedules::RingAttention(*ring, /*zigzag=*/false).ok());
  absl::StatusOr<Prediction> before = Predict(*gathered->functions().front(), options);
  absl::StatusOr<Prediction> after = Predict(*ring->functions().front(), options);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(before->overlap_fraction, 0.01);
  int shifts = 0, grads = 0;
  for (const TimelineEvent& e : after->timeline) {
    if (e.device != 0) continue;
    shifts += e.op == "shift";
    grads += e.op == "attention_grad";
    if (e.op == "shift") {
      EXPECT_EQ(e.stream, 1);
    }
  }
  // k, v: 3 shifts each; dk, dv: 4 each (the last one home). One attention_grad a step.
  EXPECT_EQ(shifts, 14);
  EXPECT_EQ(grads, 4);
  // Only the last dk/dv hop (2 of 14 equal transfers) has no step to hide under.
  EXPECT_GT(after->overlap_fraction, 0.8) << after->overlap_fraction;
  EXPECT_LT(after->overlap_fraction, 0.9) << after->overlap_fraction;
}


// pipeline-collective-matmul on the shared ag_matmul example at a size where a chunk's GEMM
// outlasts its transfer (bf16, a: 65536 x 4096 split over 8, b: 4096 x 8192 split over 8).
// The lowering gathers b (the smaller operand) and returns the product to its row split
// with one all_to_all after the loop; that all_to_all has nothing left to hide under.
// Every other transfer but the first runs under a GEMM, so the exposed communication is at
// most one chunk's all_gather plus the all_to_all, both from the collective formulas.
// (Chunks on the two streams gather side by side, each at the full bus bandwidth: the
// model does not share links between concurrent collectives; see docs/commir-run-sim.md, blind spots.)
class PipelineTimelineTest : public testing::TestWithParam<int> {};

TEST_P(PipelineTimelineTest, ExposesOneTransferPerRoundOfStreams) {
  const int chunks = GetParam();
  std::string text = ReadExample("ag_matmul");
  int replaced = absl::StrReplaceAll({{"f32[1024@tp, 256]", "bf16[65536@tp, 4096]"},
                                      {"f32[256, 512@tp]", "bf16[4096, 8192@tp]"},
                                      {"f32[1024, 512@tp]", "bf16[65536, 8192@tp]"}},
                                     &text);
  ASSERT_EQ(replaced, 3) << "the shared example changed:\n" << text;
  std::unique_ptr<Module> module = LoweredProgram(text, "ag_matmul");
  ASSERT_NE(module, nullptr);
  absl::StatusOr<int> rewritten = schedules::PipelineCollectiveMatmul(*module, chunks, 2);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  ASSERT_EQ(*rewritten, 1);
  Function& f = *module->functions().front();

  const HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  std::vector<const Operation*> gathers, others, matmuls;
  WalkOps(f.body(), [&](Operation* op) {
    if (op->name() == "all_gather") gathers.push_back(op);
    else if (op->name() == "matmul") matmuls.push_back(op);
    else if (op->name() == "all_to_all" || op->name() == "reduce_scatter" ||
             op->name() == "all_reduce" || op->name() == "shift") others.push_back(op);
  });
  ASSERT_EQ(gathers.size(), 1u) << "one chunk all_gather inside the loop";
  ASSERT_EQ(matmuls.size(), 1u) << "one chunk GEMM inside the loop";
  ASSERT_EQ(others.size(), 1u) << "the all_to_all back to the row split";
  ASSERT_EQ(others[0]->name(), "all_to_all");
  absl::StatusOr<CollectiveEstimate> gather = EstimateCollectiveOp(hw, *gathers[0], f, 0, 8);
  absl::StatusOr<CollectiveEstimate> back = EstimateCollectiveOp(hw, *others[0], f, 0, 8);
  absl::StatusOr<double> gemm = OpTime(hw, *matmuls[0], f);
  ASSERT_TRUE(gather.ok() && back.ok() && gemm.ok());
  ASSERT_GT(*gemm, gather->seconds) << "a chunk's GEMM must outlast its transfer to hide it";

  PredictOptions options;
  options.hardware = hw;
  options.record_timeline = true;
  absl::StatusOr<Prediction> p = Predict(f, options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->devices.size(), 8u);
  // Every device issues one transfer per chunk, each taking the formula's time, and the
  // all_to_all last. (communication_s is the union of these intervals: chunks on the two
  // streams transfer at once, so it is less than their sum.)
  std::vector<int> transfers(8, 0);
  std::vector<double> last_transfer_end_us(8, 0), back_start_us(8, 0);
  for (const TimelineEvent& e : p->timeline) {
    if (e.op == "all_gather") {
      ++transfers[e.device];
      EXPECT_NEAR(e.end_us - e.start_us, gather->seconds * 1e6, 1e-6);
      last_transfer_end_us[e.device] = std::max(last_transfer_end_us[e.device], e.end_us);
    } else if (e.op == "all_to_all") {
      EXPECT_NEAR(e.end_us - e.start_us, back->seconds * 1e6, 1e-6);
      back_start_us[e.device] = e.start_us;
    }
  }
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(transfers[d], chunks) << "device " << d;
    EXPECT_GE(back_start_us[d], last_transfer_end_us[d]) << "device " << d;
    const double exposed = p->devices[d].exposed_communication_s;
    // The pass puts chunk k on stream k % 2 and every accumulator update on stream 0, so
    // with more chunks than streams the slice and gather of chunk k + 2 queue on their
    // stream behind the update of chunk k + 1, which waits for that chunk's GEMM: one
    // transfer per round of streams is exposed, not only the first (a prefetching order
    // would hide them; docs/commir-run-sim.md, blind spots).
    const int exposed_transfers = (chunks + 1) / 2;
    EXPECT_LE(exposed, exposed_transfers * gather->seconds + back->seconds + 1e-12)
        << "device " << d;
    EXPECT_GE(exposed, back->seconds - 1e-12) << "device " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Chunks, PipelineTimelineTest, testing::Values(2, 4));

}  // namespace
}  // namespace commir::sim
