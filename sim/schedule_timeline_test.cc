// Timelines of schedules the passes produce from the shared examples.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/collective_op.h"
#include "sim/gemm_time.h"
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

// GEMM + reduce_scatter on 8 H100s at GPT-3 175B's tp-8 block (256 x 12288 bf16 rows of
// a 2048 x 12288 output, 6.29 MB): the owner form (rs=owner) ends with one reduce_sum of
// the 8 received chunks, which costs a launch and 8 + 1 blocks of HBM traffic, 3 us +
// 9 x 6.29 MB / 3.35 TB/s = 19.9 us (TransformerEngine's one reduce_bf16), and runs no
// add, fill or copy; the ring form (rs=ring) adds at each of its 7 steps, 3 us + 3 blocks
// / 3.35 TB/s = 8.6 us each.
TEST(ScheduleTimelineTest, OwnerFormSumsTheChunksOnce) {
  constexpr char kMatmulRs[] = R"(mesh @m(tp=8)

spmd func @f(%x: bf16[2048, 1536@tp], %w: bf16[1536@tp, 12288]) -> bf16[2048@tp, 12288] on @m {
  %p = matmul(%x, %w) : bf16[2048, 12288]
  %y = reduce_scatter(%p) {axis = tp, dim = 0} : bf16[256, 12288]
  return %y
}
)";
  constexpr double kLaunchUs = 3.0;           // h100-sxm's kernel launch overhead
  constexpr double kHbmBytesPerUs = 3.35e6;   // 3.35 TB/s
  constexpr double kBlockBytes = 256.0 * 12288 * 2;
  for (schedules::ScatterForm form : {schedules::ScatterForm::kOwner, schedules::ScatterForm::kRing}) {
    const bool owner = form == schedules::ScatterForm::kOwner;
    SCOPED_TRACE(owner ? "rs=owner" : "rs=ring");
    absl::StatusOr<std::unique_ptr<Module>> parsed = ParseModuleOrError(kMatmulRs, "matmul_rs");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    std::unique_ptr<Module> module = *std::move(parsed);
    absl::StatusOr<int> rewritten =
        schedules::RingCollectiveMatmul(*module, schedules::RingDirection::kUni, form);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status();
    ASSERT_EQ(*rewritten, 1);
    PredictOptions options;
    options.hardware = *FindBuiltinHardware("h100-sxm");
    options.record_timeline = true;
    absl::StatusOr<Prediction> p = Predict(*module->functions().front(), options);
    ASSERT_TRUE(p.ok()) << p.status();
    int sums = 0, adds = 0, fills = 0, copies = 0, shifts = 0;
    for (const TimelineEvent& e : p->timeline) {
      if (e.device != 0) continue;
      const double us = e.end_us - e.start_us;
      if (e.op == "reduce_sum") {
        ++sums;
        EXPECT_NEAR(us, kLaunchUs + 9 * kBlockBytes / kHbmBytesPerUs, 0.2);
      }
      if (e.op == "add") {
        ++adds;
        EXPECT_NEAR(us, kLaunchUs + 3 * kBlockBytes / kHbmBytesPerUs, 0.1);
      }
      if (e.op == "full") ++fills;
      if (e.op == "dynamic_update_slice") ++copies;
      if (e.op == "shift") ++shifts;
    }
    EXPECT_EQ(shifts, 7);
    EXPECT_EQ(sums, owner ? 1 : 0);
    EXPECT_EQ(adds, owner ? 0 : 7);
    EXPECT_EQ(fills, 0);
    EXPECT_EQ(copies, 0);
  }
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

// ring-collective-matmul (uni) on ag_matmul scaled so that a step's GEMM (4096 x 8192 by
// 8192 x 3584, bf16) outlasts its copy-engine shift (a 64 MiB block): every shift but the
// first runs under the previous step's GEMM. The first one runs beside the first GEMM too
// (the local block needs no transfer), so the ring exposes at most its first step, whose
// time is the copy-engine closed form: 3 us + 64 MiB / 378 GB/s (each link one way).
TEST(ScheduleTimelineTest, CopyEngineRingUnderGemmsExposesAtMostItsFirstStep) {
  std::string text = ReadExample("ag_matmul");
  int replaced = absl::StrReplaceAll({{"f32[1024@tp, 256]", "bf16[32768@tp, 8192]"},
                                      {"f32[256, 512@tp]", "bf16[8192, 28672@tp]"},
                                      {"f32[1024, 512@tp]", "bf16[32768, 28672@tp]"}},
                                     &text);
  ASSERT_EQ(replaced, 3) << "the shared example changed:\n" << text;
  std::unique_ptr<Module> module = LoweredProgram(text, "ag_matmul");
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(schedules::RingCollectiveMatmul(*module, schedules::RingDirection::kUni).ok());
  const HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  PredictOptions options;
  options.hardware = hw;
  options.record_timeline = true;
  absl::StatusOr<Prediction> p = Predict(*module->functions().front(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  const double step = 3e-6 + 4096.0 * 8192 * 2 / 378e9;
  double gemm_us = 0;
  int shifts = 0;
  for (const TimelineEvent& e : p->timeline) {
    if (e.device != 0) continue;
    if (e.op == "shift") {
      ++shifts;
      EXPECT_NEAR(e.end_us - e.start_us, step * 1e6, 1e-6);
    }
    if (e.op == "matmul") gemm_us = e.end_us - e.start_us;
  }
  EXPECT_EQ(shifts, 7);
  ASSERT_GT(gemm_us, step * 1e6) << "a step's GEMM must outlast its shift";
  for (const DevicePrediction& d : p->devices) {
    EXPECT_NEAR(d.communication_s, 7 * step, 1e-9);
    EXPECT_LE(d.exposed_communication_s, step + 1e-9);
  }
  // With the shifts as NCCL send/recv (140 GB/s and 32 SMs) the same ring is slower.
  options.hardware.p2p_transport = P2pTransport::kNccl;
  absl::StatusOr<Prediction> nccl = Predict(*module->functions().front(), options);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_GT(nccl->time_s, p->time_s);
}

// The matmul's GemmShape as op_time.cc builds it: bf16 512 x 8192 by 8192 x 7680.
GemmShape BesideShape() {
  GemmShape shape;
  shape.m = 512;
  shape.n = 7680;
  shape.k = 8192;
  shape.operand_bytes = 2.0 * (512.0 * 8192 + 8192.0 * 7680);
  return shape;
}

// `hw` with `hbm_load` bytes/s of its HBM bandwidth taken (by hand, not HardwareBeside).
HardwareSpec WithHbmTaken(HardwareSpec hw, double hbm_load) {
  EXPECT_LT(hbm_load, 0.5 * hw.hbm_bandwidth);
  hw.hbm_bandwidth -= hbm_load;
  return hw;
}

// Every matmul on the timeline (one per device of the 8) took `seconds`.
void ExpectEveryMatmulTakes(const Prediction& p, double seconds) {
  int matmuls = 0;
  for (const TimelineEvent& e : p.timeline) {
    if (e.op != "matmul") continue;
    ++matmuls;
    EXPECT_NEAR((e.end_us - e.start_us) * 1e-6, seconds, 1e-12);
  }
  EXPECT_EQ(matmuls, 8);
}

// A GEMM under an NCCL all_gather of S = 32 SMs runs its tiles on the 100 SMs left, each
// as fast as alone, with the HBM bandwidth the gather leaves: its time on the timeline is
// the GEMM heuristic's plan on 100 of the GPU's SMs at that bandwidth (gemm_time.h). The
// GEMM (bf16 512 x 8192 by 8192 x 7680, compute-bound) fills one wave of 128x256 tiles
// (120) on 132 SMs; on 100 that tiling needs two waves, and the heuristic's best there
// (128x128: 240 tiles in 3 waves, 1.5 times the work per SM) takes about 1.5 times as
// long, less where the per-wave latency and the last epilogue do not scale with the work.
TEST(ScheduleTimelineTest, GemmBesideAnNcclKernelTakesTheWavesOfTheSmsLeft) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(mesh @m(tp=8)
spmd func @f(%a: bf16[8192, 8192], %x: bf16[512, 8192], %w: bf16[8192, 7680]) -> (bf16[65536, 8192], bf16[512, 7680]) {
  %g = all_gather(%a) {axis = tp, dim = 0, stream = 1} : bf16[65536, 8192]
  %y = matmul(%x, %w) : bf16[512, 7680]
  return %g, %y
})", "beside.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *module->get()->functions().front();
  HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  ASSERT_EQ(hw.sm_count, 132);
  ASSERT_EQ(hw.nccl_collective_sms, 32);
  PredictOptions options;
  options.hardware = hw;
  options.record_timeline = true;
  const Operation* matmul = nullptr;
  for (const Operation* op : *f.body()) {
    if (op->name() == "matmul") matmul = op;
  }
  ASSERT_NE(matmul, nullptr);
  absl::StatusOr<double> alone = OpTime(hw, *matmul, f);
  absl::StatusOr<GemmPlan> on_132 = PlanGemm(hw, BesideShape(), 132);
  ASSERT_TRUE(alone.ok() && on_132.ok());
  ASSERT_NEAR(on_132->time_s, *alone, 1e-15) << "the shape is op_time.cc's";
  EXPECT_EQ(on_132->waves, 1);
  absl::StatusOr<CollectiveEstimate> g = EstimateCollectiveOp(hw, *f.body()->front(), f, 0, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  // A device reads what it sends and writes what it receives (collective_time.h).
  const double hbm_load = 2 * g->bus_bytes / g->seconds;
  absl::StatusOr<GemmPlan> on_100 = PlanGemm(WithHbmTaken(hw, hbm_load), BesideShape(), 100);
  ASSERT_TRUE(on_100.ok());
  EXPECT_GT(on_100->waves, 1);
  EXPECT_GT(on_100->time_s, 1.3 * *alone);
  ASSERT_GT(g->seconds, on_100->time_s) << "the GEMM must run under the gather all along";
  absl::StatusOr<Prediction> p = Predict(f, options);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectEveryMatmulTakes(*p, on_100->time_s);
  // NCCL with no SMs of its own (not a real setting: a check of the mechanism) leaves the
  // GEMM all 132 SMs: only the gather's HBM traffic slows it (its last wave's epilogue).
  options.hardware.nccl_collective_sms = 0;
  absl::StatusOr<GemmPlan> hbm_only = PlanGemm(WithHbmTaken(hw, hbm_load), BesideShape(), 132);
  ASSERT_TRUE(hbm_only.ok());
  EXPECT_GT(hbm_only->time_s, *alone);
  EXPECT_LT(hbm_only->time_s, 1.01 * *alone);
  p = Predict(f, options);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectEveryMatmulTakes(*p, hbm_only->time_s);
}

// Two NCCL all_gathers at once (streams 1 and 2) keep 2 x 32 SMs and take twice the HBM
// bandwidth: the same GEMM runs as the plan on 68 SMs at the bandwidth left (128x256: 120
// tiles in 2 waves, 65536 outputs per SM against 32768 on 132), slower than on 100.
TEST(ScheduleTimelineTest, ConcurrentNcclKernelsAddTheirSms) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(mesh @m(tp=8)
spmd func @f(%a: bf16[8192, 8192], %b: bf16[8192, 8192], %x: bf16[512, 8192], %w: bf16[8192, 7680]) -> (bf16[65536, 8192], bf16[65536, 8192], bf16[512, 7680]) {
  %g = all_gather(%a) {axis = tp, dim = 0, stream = 1} : bf16[65536, 8192]
  %h = all_gather(%b) {axis = tp, dim = 0, stream = 2} : bf16[65536, 8192]
  %y = matmul(%x, %w) : bf16[512, 7680]
  return %g, %h, %y
})", "two.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *module->get()->functions().front();
  const HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  absl::StatusOr<CollectiveEstimate> g = EstimateCollectiveOp(hw, *f.body()->front(), f, 0, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  const double hbm_load = 2 * (2 * g->bus_bytes / g->seconds);  // both gathers
  absl::StatusOr<GemmPlan> on_68 = PlanGemm(WithHbmTaken(hw, hbm_load), BesideShape(), 68);
  absl::StatusOr<GemmPlan> on_100 =
      PlanGemm(WithHbmTaken(hw, hbm_load / 2), BesideShape(), 100);
  ASSERT_TRUE(on_68.ok() && on_100.ok());
  EXPECT_EQ(on_68->waves * on_68->tile.m * on_68->tile.n, 65536);
  EXPECT_GT(on_68->time_s, on_100->time_s);
  ASSERT_GT(g->seconds, on_68->time_s) << "the GEMM must run under both gathers all along";
  PredictOptions options;
  options.hardware = hw;
  options.record_timeline = true;
  absl::StatusOr<Prediction> p = Predict(f, options);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectEveryMatmulTakes(*p, on_68->time_s);
}

// ring-attention on attention's backward (8 heads, 8192 keys over 4 devices, so a full
// block's step outlasts its four transfers): the lowering's all_gathers and reduce_scatters run on the main stream
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
  // The last device's queries see every key block: each step is a full (or the diagonal)
  // block, and only the last dk/dv hop (2 of 14 equal transfers) has no step to hide
  // under. (Device 0's queries see its own block only: its other steps are empty and its
  // transfers have nothing to hide under.)
  const DevicePrediction& last = after->devices.back();
  const double hidden = 1 - last.exposed_communication_s / last.communication_s;
  EXPECT_GT(hidden, 0.8) << hidden;
  EXPECT_LT(hidden, 0.9) << hidden;
  const DevicePrediction& first = after->devices.front();
  EXPECT_GT(first.exposed_communication_s, last.exposed_communication_s);
}


// Causal attention over n devices, each with 64k queries (so that the steps' attention
// outweighs the schedule's merges and transfers), under the plain ring (contiguous
// sequence) and the zigzag ring (a sequence the data loader provides in zigzag order).
// The ring's slowest device, the last, meets n - 1 full blocks and its diagonal; in the
// zigzag layout every device meets two full chunk pairs per step and, on its own step,
// two diagonals and one full pair. The predicted speedup follows the ratio of those
// critical-path (query, key) pair counts, from below: zigzag also runs two merges of two
// partials per step (one attention_merge per query chunk) against the ring's one, two
// attention calls on fully masked chunk pairs, and its kernels are half as long.
class ZigzagRingTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ZigzagRingTest, FasterThanThePlainRingByTheCriticalPathWork) {
  const int64_t n = GetParam();
  const int64_t block = 65536, sequence = n * block, chunk = block / 2;
  auto program = [&](bool zigzag) {
    const std::string t = absl::StrCat("bf16[1, 8, ", sequence, "@sp", zigzag ? " zigzag" : "",
                                       ", 128]");
    return absl::StrCat("mesh @m(sp=", n, ")\nfunc @a(%q: ", t, ", %k: ", t, ", %v: ", t,
                        ") -> ", t, " {\n  %o = attention(%q, %k, %v) {causal}\n  return %o\n}\n");
  };
  std::unique_ptr<Module> ring = LoweredProgram(program(false), "ring");
  std::unique_ptr<Module> zigzag = LoweredProgram(program(true), "zigzag");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(zigzag, nullptr);
  ASSERT_TRUE(schedules::RingAttention(*ring, /*zigzag=*/false).ok());
  ASSERT_TRUE(schedules::RingAttention(*zigzag, /*zigzag=*/true).ok());
  PredictOptions options;
  options.hardware = *FindBuiltinHardware("h100-sxm");
  absl::StatusOr<Prediction> ring_time = Predict(*ring->functions().front(), options);
  absl::StatusOr<Prediction> zigzag_time = Predict(*zigzag->functions().front(), options);
  ASSERT_TRUE(ring_time.ok()) << ring_time.status();
  ASSERT_TRUE(zigzag_time.ok()) << zigzag_time.status();
  const double b = static_cast<double>(block), c = static_cast<double>(chunk);
  const double ring_work = static_cast<double>(n - 1) * b * b + b * (b + 1) / 2;
  const double zigzag_work = 2.0 * static_cast<double>(n) * c * c + c;
  const double work_ratio = ring_work / zigzag_work;  // 1.875 on 8 devices, 1.984 on 64
  const double speedup = ring_time->time_s / zigzag_time->time_s;
  EXPECT_GT(speedup, 0.88 * work_ratio) << speedup << " vs " << work_ratio;
  EXPECT_LT(speedup, work_ratio) << speedup << " vs " << work_ratio;
  // The ring's devices wait for its last one: its first device computes little.
  EXPECT_LT(ring_time->devices.front().compute_s, 0.1 * ring_time->devices.back().compute_s);
}

INSTANTIATE_TEST_SUITE_P(Devices, ZigzagRingTest, ::testing::Values(8, 64));

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
