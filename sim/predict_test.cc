// Timeline tests: small programs whose schedule follows by hand from the formulas. The
// expected numbers are computed here from OpTime and EstimateCollectiveOp, not copied
// from the output.
#include "sim/predict.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/collective_op.h"
#include "sim/contention.h"
#include "sim/op_time.h"

namespace commir::sim {
namespace {

class PredictTest : public ::testing::Test {
 protected:
  const Function& Parse(const std::string& source) {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    return *module_->functions().front();
  }
  const Function& ParseExample(const std::string& name) {
    std::ifstream in("testdata/examples/" + name + ".commir");
    std::stringstream text;
    text << in.rdbuf();
    return Parse(text.str());
  }
  // The n-th op of the function's body.
  const Operation& Op(const Function& f, int n) {
    auto it = f.body()->begin();
    for (int i = 0; i < n; ++i) ++it;
    return **it;
  }
  double Time(const Function& f, int n) {
    absl::StatusOr<double> t = OpTime(hw_, Op(f, n), f);
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }
  // The n-th op of a block (a loop's body) of `f`.
  double Time(const Block& block, int n, const Function& f) {
    auto it = block.begin();
    for (int i = 0; i < n; ++i) ++it;
    absl::StatusOr<double> t = OpTime(hw_, **it, f);
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }
  double CollectiveTime(const Block& block, int n, const Function& f) {
    auto it = block.begin();
    for (int i = 0; i < n; ++i) ++it;
    absl::StatusOr<CollectiveEstimate> e = EstimateCollectiveOp(hw_, **it, f, 0, 8);
    EXPECT_TRUE(e.ok()) << e.status();
    return e->seconds;
  }
  // A shift moved by the copy engines (collective_time.h's closed form).
  double CopyEngineTime(const Operation& shift, const Function& f) {
    absl::StatusOr<CopyEngineEstimate> e = EstimateCopyEngineShift(hw_, shift, f, 0);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->seconds : -1;
  }
  // What `f`'s op n takes beside `load` (contention.h).
  double TimeBeside(const Function& f, int n, const CommunicationLoad& load) {
    absl::StatusOr<double> t = OpTime(HardwareBeside(hw_, load), Op(f, n), f);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : -1;
  }
  // What `f`'s op n takes alone on the GPU with `hbm_load` bytes/s of its HBM bandwidth
  // taken: the GEMM formula on the lowered bandwidth, not through the contention code.
  double TimeWithHbmTaken(const Function& f, int n, double hbm_load) {
    HardwareSpec left = hw_;
    left.hbm_bandwidth -= hbm_load;
    EXPECT_GT(left.hbm_bandwidth, 0.5 * hw_.hbm_bandwidth);
    absl::StatusOr<double> t = OpTime(left, Op(f, n), f);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : -1;
  }
  double CollectiveTime(const Function& f, int n, int64_t device = 0) {
    absl::StatusOr<CollectiveEstimate> e = EstimateCollectiveOp(hw_, Op(f, n), f, device, 8);
    EXPECT_TRUE(e.ok()) << e.status();
    return e->seconds;
  }
  Prediction Run(const Function& f) {
    PredictOptions options;
    options.hardware = hw_;
    options.record_timeline = true;
    absl::StatusOr<Prediction> p = Predict(f, options);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : Prediction{};
  }

  HardwareSpec hw_ = *FindBuiltinHardware("h100-sxm");
  std::unique_ptr<Module> module_;
};

TEST(IntervalTest, UnionAndUncoveredLength) {
  EXPECT_DOUBLE_EQ(UnionLength({{0, 2}, {1, 3}, {5, 6}}), 4);
  // [0,1] and [2,3] of the first, [7,8] of the second.
  EXPECT_DOUBLE_EQ(UncoveredLength({{0, 4}, {6, 8}}, {{1, 2}, {3, 7}}), 3);
  EXPECT_DOUBLE_EQ(UncoveredLength({{0, 4}}, {}), 4);
}

// Two GEMMs on two streams of one device share its SMs: the one issued second runs when
// the first has finished, although its stream is free.
TEST_F(PredictTest, ComputeOnTwoStreamsSharesTheSms) {
  const Function& f = Parse(R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[4096, 4096], %b: bf16[4096, 4096], %c: bf16[2048, 4096]) -> (bf16[4096, 4096], bf16[2048, 4096]) {
  %x = matmul(%a, %b) {stream = 0} : bf16[4096, 4096]
  %y = matmul(%c, %b) {stream = 1} : bf16[2048, 4096]
  return %x, %y
})");
  Prediction p = Run(f);
  EXPECT_DOUBLE_EQ(p.time_s, Time(f, 0) + Time(f, 1));
  ASSERT_EQ(p.timeline.size(), 4u);  // two ops on each of two devices
  // Issue order: %x on devices 0 and 1, then %y on both, each after its device's %x.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.timeline[i].device, i % 2);
    EXPECT_EQ(p.timeline[i].stream, i / 2);
    EXPECT_DOUBLE_EQ(p.timeline[i].start_us, i < 2 ? 0 : Time(f, 0) * 1e6);
  }
}

// A kernel issued later on another stream fills an idle gap of the SMs before a kernel
// that waits for communication.
TEST_F(PredictTest, ComputeFillsAnEarlierGap) {
  const Function& f = Parse(R"(
mesh @m(tp=8)
spmd func @f(%a: bf16[4096, 4096], %b: bf16[4096, 4096], %c: bf16[2048, 4096]) -> (bf16[32768, 4096], bf16[2048, 4096]) {
  %g = all_gather(%a) {axis = tp, dim = 0, stream = 0} : bf16[32768, 4096]
  %x = matmul(%g, %b) {stream = 0} : bf16[32768, 4096]
  %y = matmul(%c, %b) {stream = 1} : bf16[2048, 4096]
  return %x, %y
})");
  Prediction p = Run(f);
  double y_start = -1, x_start = -1;
  for (const TimelineEvent& e : p.timeline) {
    if (e.device != 0) continue;
    if (e.op == "matmul" && e.stream == 1) y_start = e.start_us;
    if (e.op == "matmul" && e.stream == 0) x_start = e.start_us;
  }
  EXPECT_EQ(y_start, 0);  // while the gather runs
  EXPECT_GT(x_start, 0);  // after the gather
}

// A hardware figure set past the JSON file's range checks (a denormal NVLink bandwidth)
// makes the gather take forever: an error, never a prediction of "inf" seconds.
TEST_F(PredictTest, ANonFiniteTimeIsAnError) {
  const Function& f = Parse(R"(
mesh @m(tp=8)
spmd func @f(%a: bf16[4096, 4096]) -> bf16[32768, 4096] {
  %g = all_gather(%a) {axis = tp, dim = 0} : bf16[32768, 4096]
  return %g
})");
  PredictOptions options;
  options.hardware = hw_;
  options.hardware.nvlink_bandwidth_per_direction = 1e-320;
  options.hardware.p2p_bandwidth = 1e-320;
  absl::StatusOr<Prediction> p = Predict(f, options);
  ASSERT_FALSE(p.ok()) << "predicted " << p->time_s << " s";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("is not finite"), std::string::npos) << p.status();
}

TEST_F(PredictTest, OpsOnOneStreamRunInOrder) {
  const Function& f = Parse(R"(
func @f(%a: bf16[4096, 4096], %b: bf16[4096, 4096], %c: bf16[2048, 4096]) -> (bf16[4096, 4096], bf16[2048, 4096]) {
  %x = matmul(%a, %b) : bf16[4096, 4096]
  %y = matmul(%c, %b) : bf16[2048, 4096]
  return %x, %y
})");
  EXPECT_DOUBLE_EQ(Run(f).time_s, Time(f, 0) + Time(f, 1));
}

// Every device runs the same program, so the slowest member is made by data: device
// streams differ in how much work precedes the collective only through the operand's
// producer. Here the gathered operand is produced by a long matmul on stream 0 while the
// all_gather's own stream (1) is idle: the collective starts when the operand is ready.
TEST_F(PredictTest, CollectiveWaitsForItsOperandsAndOverlapsNothing) {
  const Function& f = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[16384@tp, 4096], %b: bf16[4096, 4096]) -> (bf16[16384, 4096]) {
  %x = matmul(%a, %b) : bf16[4096, 4096]
  %g = all_gather(%x) {axis = tp, dim = 0, stream = 1} : bf16[16384, 4096]
  return %g
})");
  Prediction p = Run(f);
  double matmul = Time(f, 0), gather = CollectiveTime(f, 1);
  EXPECT_DOUBLE_EQ(p.time_s, matmul + gather);
  ASSERT_EQ(p.devices.size(), 4u);
  for (const DevicePrediction& d : p.devices) {
    EXPECT_DOUBLE_EQ(d.communication_s, gather);
    EXPECT_DOUBLE_EQ(d.exposed_communication_s, gather);
  }
  EXPECT_DOUBLE_EQ(p.overlap_fraction, 0);
}

// A GEMM issued after an all_gather on another stream overlaps it and runs, over the
// overlapped part, at its speed beside the NCCL kernel's SMs and HBM traffic; a shift by
// the copy engines takes no SMs, only HBM bandwidth (this GEMM is compute-bound: of its
// time only the last wave's epilogue stores wait on HBM, so it slows by well under 1%);
// the same shift as an NCCL send/recv takes nccl_p2p_sms.
TEST_F(PredictTest, CommunicationKernelSlowsAnOverlappingGemm) {
  const Function& f = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[16384@tp, 4096], %c: bf16[1024, 4096], %b: bf16[4096, 8192]) -> (bf16[16384, 4096], bf16[1024, 8192]) {
  %g = all_gather(%a) {axis = tp, dim = 0, stream = 1} : bf16[16384, 4096]
  %x = matmul(%c, %b) : bf16[1024, 8192]
  return %g, %x
})");
  absl::StatusOr<CollectiveEstimate> g = EstimateCollectiveOp(hw_, Op(f, 0), f, 0, 8);
  ASSERT_TRUE(g.ok());
  const double gather = g->seconds, matmul = Time(f, 1);
  const CommunicationLoad load = NcclLoad(hw_, CollectiveKind::kAllGather, *g);
  EXPECT_EQ(load.sms, 32);
  const double beside = TimeBeside(f, 1, load);
  ASSERT_GT(beside, matmul);
  ASSERT_GT(gather, beside) << "the GEMM must run under the gather all along";
  Prediction traced = Run(f);
  EXPECT_NEAR(traced.time_s, gather, 1e-12);
  // How long the GEMM took on the timeline: its time beside the load.
  for (const TimelineEvent& e : traced.timeline) {
    if (e.op == "matmul") {
      EXPECT_NEAR(e.end_us - e.start_us, beside * 1e6, 1e-6);
    }
  }

  const Function& s = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[4096@tp, 4096], %b: bf16[4096, 8192]) -> (bf16[4096@tp, 4096], bf16[1024, 8192]) {
  %g = shift(%a) {axis = tp, offset = 1, stream = 1} : bf16[1024, 4096]
  %x = matmul(%a, %b) : bf16[1024, 8192]
  return %g, %x
})");
  ASSERT_GT(hw_.copy_engines, 0);
  absl::StatusOr<CopyEngineEstimate> ce = EstimateCopyEngineShift(hw_, Op(s, 0), s, 0);
  ASSERT_TRUE(ce.ok()) << ce.status();
  const double copy = ce->seconds, alone = Time(s, 1);
  ASSERT_LT(copy, alone) << "the copy ends within the GEMM";
  // The copy reads and writes its bytes in HBM: 2 x bytes / seconds of the bandwidth.
  const double under_copy = TimeWithHbmTaken(s, 1, 2 * ce->bytes / copy);
  EXPECT_GT(under_copy, alone);
  EXPECT_LT(under_copy, 1.01 * alone);
  EXPECT_NEAR(Run(s).time_s, alone + copy * (under_copy / alone - 1), 1e-12);
  hw_.p2p_transport = P2pTransport::kNccl;  // now the shift is an NCCL kernel on the SMs
  absl::StatusOr<CollectiveEstimate> sr = EstimateCollectiveOp(hw_, Op(s, 0), s, 0, 8);
  ASSERT_TRUE(sr.ok());
  const double shift = sr->seconds, gemm = Time(s, 1);
  const double gemm_beside = TimeBeside(s, 1, NcclLoad(hw_, CollectiveKind::kSendRecv, *sr));
  ASSERT_LT(shift, gemm) << "the shift ends within the GEMM";
  // The GEMM runs beside the shift for `shift` seconds, at gemm / gemm_beside of its speed.
  EXPECT_NEAR(Run(s).time_s, gemm + shift * (gemm_beside / gemm - 1), 1e-12);
}

// Copy engines reach peers over NVLink only: a shift whose peers sit on another node is an
// NCCL send/recv over the network, whatever p2p says; inside a node it is a peer copy.
TEST_F(PredictTest, ShiftAcrossNodesGoesThroughNccl) {
  const Function& f = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[4096@tp, 4096]) -> (bf16[4096@tp, 4096]) {
  %g = shift(%a) {axis = tp, offset = 1} : bf16[1024, 4096]
  return %g
})");
  for (int64_t gpus_per_node : {2, 4}) {
    PredictOptions options;
    options.hardware = hw_;
    options.gpus_per_node = gpus_per_node;
    options.record_timeline = true;
    absl::StatusOr<Prediction> p = Predict(f, options);
    ASSERT_TRUE(p.ok()) << p.status();
    int shifts = 0;
    for (const TimelineEvent& e : p->timeline) {
      ++shifts;
      double expected = CopyEngineTime(Op(f, 0), f);
      if (gpus_per_node == 2) {  // every device has a peer on the other node
        absl::StatusOr<CollectiveEstimate> nccl =
            EstimateCollectiveOp(hw_, Op(f, 0), f, e.device, gpus_per_node);
        ASSERT_TRUE(nccl.ok());
        expected = nccl->seconds;
        // The network's 50 GB/s x 0.9, far below the copy engines.
        EXPECT_GT(expected, 5 * CopyEngineTime(Op(f, 0), f));
      }
      EXPECT_NEAR(e.end_us - e.start_us, expected * 1e6, 1e-6) << gpus_per_node;
    }
    EXPECT_EQ(shifts, 4);
  }
}

// Three chunks gathered on stream 1, each multiplied on stream 0 as soon as it arrives.
// When a GEMM takes longer than a transfer, every transfer after the first runs under the
// previous chunk's GEMM and only the first transfer is exposed. With no NCCL SMs the
// transfers still take HBM bandwidth: the first GEMM (longer than two transfers) runs
// beside the second and third for 2G at M' / M of its time, so time = G + 3M + 2G (M'/M - 1),
// M' being M on the HBM bandwidth the gather leaves.
TEST_F(PredictTest, PipelinedAllGatherMatmulHidesAllButTheFirstTransfer) {
  const Function& f = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a0: bf16[2048@tp, 8192], %a1: bf16[2048@tp, 8192], %a2: bf16[2048@tp, 8192],
             %b: bf16[8192, 8192]) -> (bf16[2048, 8192], bf16[2048, 8192], bf16[2048, 8192]) {
  %g0 = all_gather(%a0) {axis = tp, dim = 0, stream = 1} : bf16[2048, 8192]
  %g1 = all_gather(%a1) {axis = tp, dim = 0, stream = 1} : bf16[2048, 8192]
  %g2 = all_gather(%a2) {axis = tp, dim = 0, stream = 1} : bf16[2048, 8192]
  %p0 = matmul(%g0, %b) : bf16[2048, 8192]
  %p1 = matmul(%g1, %b) : bf16[2048, 8192]
  %p2 = matmul(%g2, %b) : bf16[2048, 8192]
  return %p0, %p1, %p2
})");
  hw_.nccl_collective_sms = 0;  // SM contention is tested above; keep this by hand
  absl::StatusOr<CollectiveEstimate> g = EstimateCollectiveOp(hw_, Op(f, 0), f, 0, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  const double gather = g->seconds, matmul = Time(f, 3);
  ASSERT_GT(matmul, 2 * gather) << "the first chunk's GEMM must outlast the other transfers";
  // A device reads what it sends and writes what it receives: 2 x link bytes / time of
  // HBM (collective_time.h).
  const double under_gather = TimeWithHbmTaken(f, 3, 2 * g->bus_bytes / gather);
  ASSERT_GT(under_gather, matmul);
  Prediction p = Run(f);
  EXPECT_NEAR(p.time_s, gather + 3 * matmul + 2 * gather * (under_gather / matmul - 1), 1e-12);
  for (const DevicePrediction& d : p.devices) {
    EXPECT_NEAR(d.exposed_communication_s, gather, 1e-12);
    EXPECT_NEAR(d.communication_s, 3 * gather, 1e-12);
  }
  EXPECT_NEAR(p.overlap_fraction, 2.0 / 3.0, 1e-9);
}

// The shared ring example: four steps of shift (stream 1) and matmul; whatever the sizes,
// each step's matmul waits for the block the previous shift delivered.
TEST_F(PredictTest, RingExampleFollowsItsShifts) {
  const Function& f = ParseExample("ring_ag_matmul");
  Prediction p = Run(f);
  ASSERT_EQ(p.devices.size(), 4u);
  EXPECT_GT(p.time_s, 0);
  int shifts = 0, matmuls = 0;
  for (const TimelineEvent& e : p.timeline) {
    if (e.device != 0) continue;
    shifts += e.op == "shift";
    matmuls += e.op == "matmul";
    if (e.op == "shift") {
      EXPECT_EQ(e.stream, 1);
    }
  }
  EXPECT_EQ(shifts, 4);
  EXPECT_EQ(matmuls, 4);
}

// A shift by a multiple of the axis size sends nothing (the last step of a ring): it
// takes no time and the matmul that follows starts at once.
TEST_F(PredictTest, ShiftThatSendsNothingTakesNoTime) {
  const Function& f = Parse(R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[4096@tp, 4096], %b: bf16[4096, 4096]) -> (bf16[1024, 4096]) {
  %n = shift(%a) {axis = tp, offset = 4} : bf16[1024, 4096]
  %x = matmul(%n, %b) : bf16[1024, 4096]
  return %x
})");
  EXPECT_EQ(CollectiveTime(f, 0), 0);
  Prediction p = Run(f);
  EXPECT_DOUBLE_EQ(p.time_s, Time(f, 1));
  EXPECT_EQ(p.devices[0].communication_s, 0);
}

// exp after exp: each value dies after the next is made, so at most two are live
// (inputs included, freed after their last use).
TEST_F(PredictTest, MemoryPeakOfAChain) {
  const Function& f = Parse(R"(
func @f(%x: f32[1024, 1024]) -> (f32[1024, 1024]) {
  %y = exp(%x)
  %z = exp(%y)
  %w = exp(%z)
  return %w
})");
  Prediction p = Run(f);
  EXPECT_EQ(p.devices[0].peak_memory_bytes, 2 * 1024 * 1024 * 4);
  EXPECT_DOUBLE_EQ(p.time_s, Time(f, 0) + Time(f, 1) + Time(f, 2));
}

TEST_F(PredictTest, RepeatedRunsGiveIdenticalPredictions) {
  for (const char* name : {"ring_ag_matmul", "transformer_block", "attention", "mlp"}) {
    const Function& f = ParseExample(name);
    Prediction a = Run(f), b = Run(f);
    EXPECT_EQ(a.time_s, b.time_s) << name;
    EXPECT_EQ(a.total_flops, b.total_flops) << name;
    ASSERT_EQ(a.devices.size(), b.devices.size());
    for (size_t d = 0; d < a.devices.size(); ++d) {
      EXPECT_EQ(a.devices[d].exposed_communication_s, b.devices[d].exposed_communication_s);
      EXPECT_EQ(a.devices[d].peak_memory_bytes, b.devices[d].peak_memory_bytes);
    }
    ASSERT_EQ(a.timeline.size(), b.timeline.size()) << name;
    for (size_t i = 0; i < a.timeline.size(); ++i) {
      EXPECT_EQ(a.timeline[i].start_us, b.timeline[i].start_us);
      EXPECT_EQ(a.timeline[i].op, b.timeline[i].op);
    }
  }
}

TEST_F(PredictTest, SummaryDoesNotNeedTheTimeline) {
  const Function& f = ParseExample("ring_ag_matmul");
  PredictOptions options;
  options.hardware = hw_;
  absl::StatusOr<Prediction> without = Predict(f, options);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->timeline.empty());
  EXPECT_GT(without->time_s, 0);
  EXPECT_EQ(without->time_s, Run(f).time_s);
}

// Eight devices in one node, two chunks: G + 2M when a GEMM outlasts a transfer.
TEST_F(PredictTest, TwoChunkPipelineOnEightDevices) {
  const Function& f = Parse(R"(
mesh @m(tp=8)
spmd func @f(%a0: bf16[4096@tp, 8192], %a1: bf16[4096@tp, 8192], %b: bf16[8192, 1024]) -> (bf16[4096, 1024], bf16[4096, 1024]) {
  %g0 = all_gather(%a0) {axis = tp, dim = 0, stream = 1} : bf16[4096, 8192]
  %g1 = all_gather(%a1) {axis = tp, dim = 0, stream = 1} : bf16[4096, 8192]
  %p0 = matmul(%g0, %b) : bf16[4096, 1024]
  %p1 = matmul(%g1, %b) : bf16[4096, 1024]
  return %p0, %p1
})");
  hw_.nccl_collective_sms = 0;
  double gather = CollectiveTime(f, 0), matmul = Time(f, 2);
  Prediction p = Run(f);
  EXPECT_NEAR(p.time_s, gather + std::max(gather, matmul) + matmul, 1e-12);
}

TEST_F(PredictTest, BadOptionsAreErrors) {
  const Function& f = ParseExample("mlp");
  PredictOptions options;
  options.hardware = hw_;
  options.gpus_per_node = 0;
  EXPECT_FALSE(Predict(f, options).ok());
}

// ---- Loops repeated in closed form -------------------------------------------------

// Loops whose iterations settle into a steady state: a GEMM chain, a ring that overlaps
// a copy-engine shift with compute on another stream, an all_reduce on the SMs that
// slows the GEMM beside it (and runs ahead of it: never steady), a loop that passes a
// weight through unchanged, nested loops, and a loop that starts behind a long kernel
// on its stream.
std::string LoopProgram(int kind, int64_t trips) {
  const std::string n = std::to_string(trips);
  switch (kind) {
    case 0:
      return R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[2048, 2048], %w: bf16[2048, 2048]) -> (bf16[2048, 2048]) {
  %y = for %i = 0 to )" + n + R"( step 1 iter(%x = %a) {
    %x1 = matmul(%x, %w) : bf16[2048, 2048]
    yield %x1
  } : (bf16[2048, 2048])
  return %y
})";
    case 1:
      // The shift (32 MiB by the copy engines) outlasts the GEMM, so the GEMMs follow the
      // shifts: a steady state (a shift stream running ahead would hold more each step).
      return R"(
mesh @m(tp=4)
spmd func @f(%a: bf16[4096, 4096], %b: bf16[4096, 128]) -> (bf16[4096, 128], bf16[4096, 4096]) {
  %c0 = full() {value = 0.0} : bf16[4096, 128]
  %c, %last = for %i = 0 to )" + n + R"( step 1 iter(%acc = %c0, %blk = %a) {
    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : bf16[4096, 4096]
    %part = matmul(%blk, %b) : bf16[4096, 128]
    %acc1 = add(%acc, %part) : bf16[4096, 128]
    yield %acc1, %next
  } : (bf16[4096, 128], bf16[4096, 4096])
  return %c, %last
})";
    case 2:
      return R"(
mesh @m(dp=2, tp=4)
spmd func @f(%a: bf16[1024, 4096], %b: bf16[4096, 4096]) -> (bf16[1024, 4096], bf16[1024, 4096]) {
  %c0 = full() {value = 0.0} : bf16[1024, 4096]
  %c, %last = for %i = 0 to )" + n + R"( step 1 iter(%acc = %c0, %blk = %a) {
    %r = all_reduce(%blk) {axis = dp, stream = 1} : bf16[1024, 4096]
    %part = matmul(%blk, %b) : bf16[1024, 4096]
    %acc1 = add(%acc, %part) : bf16[1024, 4096]
    yield %acc1, %r
  } : (bf16[1024, 4096], bf16[1024, 4096])
  return %c, %last
})";
    case 3:
      return R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[2048, 2048], %w: bf16[2048, 2048]) -> (bf16[2048, 2048], bf16[2048, 2048]) {
  %y, %v = for %i = 0 to )" + n + R"( step 1 iter(%x = %a, %u = %w) {
    %x1 = matmul(%x, %u) : bf16[2048, 2048]
    %x2 = add(%x1, %x) : bf16[2048, 2048]
    yield %x2, %u
  } : (bf16[2048, 2048], bf16[2048, 2048])
  return %y, %v
})";
    case 4:
      return R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[2048, 2048], %w: bf16[2048, 2048]) -> (bf16[2048, 2048]) {
  %y = for %i = 0 to )" + n + R"( step 1 iter(%x = %a) {
    %z = for %j = 0 to 3 step 1 iter(%t = %x) {
      %t1 = matmul(%t, %w) : bf16[2048, 2048]
      yield %t1
    } : (bf16[2048, 2048])
    %x1 = add(%z, %x) : bf16[2048, 2048]
    yield %x1
  } : (bf16[2048, 2048])
  return %y
})";
    default:
      return R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[2048, 2048], %w: bf16[2048, 2048], %big: bf16[8192, 8192]) -> (bf16[2048, 2048], bf16[8192, 8192]) {
  %b2 = matmul(%big, %big) {stream = 1} : bf16[8192, 8192]
  %y = for %i = 0 to )" + n + R"( step 1 iter(%x = %a) {
    %x1 = matmul(%x, %w) {stream = 1} : bf16[2048, 2048]
    yield %x1
  } : (bf16[2048, 2048])
  return %y, %b2
})";
  }
}

Prediction PredictLoop(const Function& f, const HardwareSpec& hw, bool closed_form) {
  PredictOptions options;
  options.hardware = hw;
  options.limits.repeat_loops_in_closed_form = closed_form;
  absl::StatusOr<Prediction> p = Predict(f, options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Prediction{};
}

void ExpectNear(double closed, double simulated, const std::string& what) {
  EXPECT_NEAR(closed, simulated, 1e-9 * std::max(std::abs(simulated), 1e-12)) << what;
}

// A loop whose keys move past its queries: iterations 0-19 attend to keys all before the
// queries, 20 to the diagonal, 21-199 to keys all after them. Steady from iteration 2 to
// 19, the timeline would repeat the full blocks in closed form; the positions follow the
// induction variable, so every iteration is simulated and the empty ones cost little.
TEST_F(PredictTest, LoopWhoseAttentionPositionsFollowTheIterationsIsNotRepeated) {
  const Function& f = Parse(R"(mesh @m(sp=1)
spmd func @f(%q: bf16[1, 8, 128, 64], %k: bf16[1, 8, 128, 64]) -> bf16[1, 8, 128, 64] on @m {
  %qp = full() {value = 2560} : index
  %out = for %i = 0 to 200 step 1 iter(%acc = %q) {
    %kp = mul(%i, 128) : index
    %o = attention(%acc, %k, %k, %qp, %kp) {causal}
    yield %o
  }
  return %out
})");
  Prediction closed = PredictLoop(f, hw_, true);
  Prediction simulated = PredictLoop(f, hw_, false);
  EXPECT_EQ(closed.repeated_iterations, 0u);
  EXPECT_EQ(closed.time_s, simulated.time_s);
  EXPECT_EQ(closed.total_flops, simulated.total_flops);
  // 20 full blocks and a diagonal: 8 heads x (20 x 128^2 + 128 x 129 / 2) pairs.
  EXPECT_EQ(closed.total_flops, 8.0 * (20 * 128 * 128 + 128 * 129 / 2) * 2 * (64 + 64));
  EXPECT_EQ(closed.attention_positions_unknown, 0);
}

// The closed form gives what simulating every iteration gives (independently: the same
// backend with the closed form off), on loops short enough to simulate.
TEST_F(PredictTest, LoopInClosedFormEqualsEveryIterationSimulated) {
  for (int kind = 0; kind <= 5; ++kind) {
    for (int64_t trips : {1, 2, 3, 5, 17, 200}) {
      const Function& f = Parse(LoopProgram(kind, trips));
      Prediction closed = PredictLoop(f, hw_, true);
      Prediction simulated = PredictLoop(f, hw_, false);
      const std::string what = absl::StrCat("kind ", kind, ", ", trips, " trips");
      EXPECT_EQ(simulated.repeated_iterations, 0u) << what;
      // The all_reduce's stream runs ahead of the GEMMs by more in every iteration: no
      // steady state, every iteration is simulated.
      if (trips >= 17 && kind != 2) {
        EXPECT_GT(closed.repeated_iterations, 0u) << what;
      }
      ExpectNear(closed.time_s, simulated.time_s, what);
      ExpectNear(closed.overlap_fraction, simulated.overlap_fraction, what);
      ExpectNear(closed.total_flops, simulated.total_flops, what);
      ExpectNear(closed.fraction_of_peak, simulated.fraction_of_peak, what);
      ASSERT_EQ(closed.devices.size(), simulated.devices.size()) << what;
      for (size_t d = 0; d < closed.devices.size(); ++d) {
        const DevicePrediction& c = closed.devices[d];
        const DevicePrediction& s = simulated.devices[d];
        ExpectNear(c.time_s, s.time_s, what);
        ExpectNear(c.compute_s, s.compute_s, what);
        ExpectNear(c.communication_s, s.communication_s, what);
        ExpectNear(c.exposed_communication_s, s.exposed_communication_s, what);
        EXPECT_EQ(c.peak_memory_bytes, s.peak_memory_bytes) << what;
      }
    }
  }
}

// A million iterations of one GEMM: each waits for the one before, so the run takes
// exactly a million GEMM times, and only the first iterations are simulated.
TEST_F(PredictTest, MillionTripLoopTakesTripsTimesOneIteration) {
  const Function& f = Parse(LoopProgram(0, 1000000));
  const double gemm = Time(*(*f.body()->begin())->region(0), 0, f);
  Prediction p = PredictLoop(f, hw_, true);
  EXPECT_NEAR(p.time_s, 1e6 * gemm, 1e-9 * 1e6 * gemm);
  EXPECT_NEAR(p.devices[0].compute_s, 1e6 * gemm, 1e-9 * 1e6 * gemm);
  EXPECT_LT(p.simulated_kernels, 10);
  EXPECT_GT(p.repeated_iterations, 999990u);
  EXPECT_LE(p.retained_intervals, 4);
}

// The same for a loop around one shift (on the copy engines): constant state, however
// long the loop, the iterations in closed form.
TEST_F(PredictTest, LoopAroundOneShiftNeverGrows) {
  const Function& f = Parse(R"(
mesh @m(tp=2)
spmd func @f(%a: f32[1024, 1024]) -> (f32[1024, 1024]) {
  %y = for %i = 0 to 9223372036854775807 step 1 iter(%x = %a) {
    %x1 = shift(%x) {axis = tp, offset = 1} : f32[1024, 1024]
    yield %x1
  } : (f32[1024, 1024])
  return %y
})");
  const double shift = CopyEngineTime(**(*f.body()->begin())->region(0)->begin(), f);
  Prediction p = PredictLoop(f, hw_, true);
  const double trips = 9223372036854775807.0;
  EXPECT_NEAR(p.time_s, trips * shift, 1e-9 * trips * shift);
  EXPECT_LT(p.simulated_kernels, 20);
  EXPECT_LE(p.retained_intervals, 8);
}

// Simulated one by one (as for a trace), a long loop holds only the intervals a later
// kernel can still meet, not one per kernel issued.
TEST_F(PredictTest, EveryIterationSimulatedHoldsBoundedState) {
  const Function& f = Parse(LoopProgram(1, 5000));
  Prediction p = PredictLoop(f, hw_, false);
  EXPECT_GE(p.simulated_kernels, 5000 * 4 * 3);
  EXPECT_LE(p.retained_intervals, 64);
}

// A loop that never settles (here: the closed form is off) stops at the kernel bound with
// an error at the loop; a timeline that would pass the bound is refused before it runs.
TEST_F(PredictTest, KernelBoundNamesTheOutermostLoop) {
  const Function& f = Parse(R"(
mesh @m(tp=2)
spmd func @f(%a: f32[1024, 1024]) -> (f32[1024, 1024]) {
  %y = for %i = 0 to 9223372036854775807 step 1 iter(%x = %a) {
    %z = for %j = 0 to 4 step 1 iter(%t = %x) {
      %t1 = shift(%t) {axis = tp, offset = 1} : f32[1024, 1024]
      yield %t1
    } : (f32[1024, 1024])
    yield %z
  } : (f32[1024, 1024])
  return %y
})");
  PredictOptions options;
  options.hardware = hw_;
  options.limits.max_simulated_kernels = 1000;
  options.limits.repeat_loops_in_closed_form = false;
  Location where;
  absl::StatusOr<Prediction> p = Predict(f, options, &where);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              ::testing::HasSubstr("the loop here (9223372036854775807 iterations) needs more "
                                   "than 1000 kernels simulated one by one"));
  EXPECT_EQ(where.line, 4);
  EXPECT_EQ(where.col, 8);

  options.limits.repeat_loops_in_closed_form = true;
  options.record_timeline = true;
  p = Predict(f, options, &where);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              ::testing::HasSubstr("a timeline of every kernel would hold over 9.2e18 kernels, "
                                   "more than the 1000"));
  EXPECT_EQ(where.line, 4);
  EXPECT_EQ(where.col, 8);
}

// A streamed timeline gets every kernel, in the order the recorded one has them.
TEST_F(PredictTest, StreamedTimelineEqualsTheRecordedOne) {
  const Function& f = Parse(LoopProgram(1, 30));
  std::vector<TimelineEvent> streamed;
  PredictOptions options;
  options.hardware = hw_;
  options.timeline_sink = [&](const TimelineEvent& e) { streamed.push_back(e); };
  absl::StatusOr<Prediction> p = Predict(f, options);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->timeline.empty());
  EXPECT_EQ(p->repeated_iterations, 0u);
  Prediction recorded = Run(f);
  ASSERT_EQ(streamed.size(), recorded.timeline.size());
  ASSERT_EQ(streamed.size(), 4 + 30u * 4 * 3);  // the full(), then three kernels a trip
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].op, recorded.timeline[i].op);
    EXPECT_EQ(streamed[i].start_us, recorded.timeline[i].start_us);
  }
}

}  // namespace
}  // namespace commir::sim
