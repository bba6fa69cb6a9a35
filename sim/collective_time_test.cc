#include "sim/collective_time.h"

#include <cmath>

#include "gtest/gtest.h"

namespace commir::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }

CollectiveEstimate Estimate(CollectiveKind kind, double bytes, const GroupPlacement& group,
                            const HardwareSpec& hw = H100()) {
  absl::StatusOr<CollectiveEstimate> e = EstimateCollective(hw, kind, bytes, group);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : CollectiveEstimate{};
}

// The H100 figures the closed forms below use, written out: NVLink 450 GB/s x 0.82 bus
// efficiency, half-efficiency size 0.75 MiB, Simple: 8.4 us + 3.4 us per step.
double SizeEfficiency(double bytes) { return bytes / (bytes + 0.75 * kMiB); }

TEST(CollectiveTimeTest, AllGatherOf1GiBOn8GpusInOneNode) {
  CollectiveEstimate e = Estimate(CollectiveKind::kAllGather, kGiB, SingleNodeGroup(8));
  double busbw = 450e9 * 0.82 * SizeEfficiency(kGiB);
  double expected = 8.4e-6 + 7 * 3.4e-6 + (7.0 / 8.0 * kGiB) / busbw;
  EXPECT_EQ(e.protocol, NcclProtocol::kSimple);
  EXPECT_EQ(e.steps, 7);
  EXPECT_DOUBLE_EQ(e.bus_bytes, 7.0 / 8.0 * kGiB);
  EXPECT_NEAR(e.seconds, expected, 1e-12);
  // calibration.md: nccl-tests busbw 360-370 GB/s at >= 1 GiB on 8xH100.
  double measured_style_busbw = e.bus_bytes / e.seconds;
  EXPECT_GT(measured_style_busbw, 355e9);
  EXPECT_LT(measured_style_busbw, 375e9);
}

TEST(CollectiveTimeTest, BusBandwidthFallsAtSmallerMessages) {
  // calibration.md: ~0.45 of the 450 GB/s peak at 16 MiB.
  CollectiveEstimate e = Estimate(CollectiveKind::kAllGather, 16 * kMiB, SingleNodeGroup(8));
  double busbw = e.bus_bytes / e.seconds;
  EXPECT_GT(busbw, 0.40 * 450e9);
  EXPECT_LT(busbw, 0.50 * 450e9);
}

TEST(CollectiveTimeTest, ReduceScatterMatchesAllGatherAndAllReduceDoublesIt) {
  GroupPlacement node = SingleNodeGroup(8);
  CollectiveEstimate ag = Estimate(CollectiveKind::kAllGather, kGiB, node);
  CollectiveEstimate rs = Estimate(CollectiveKind::kReduceScatter, kGiB, node);
  CollectiveEstimate ar = Estimate(CollectiveKind::kAllReduce, kGiB, node);
  EXPECT_DOUBLE_EQ(rs.seconds, ag.seconds);
  EXPECT_EQ(ar.steps, 14);
  EXPECT_DOUBLE_EQ(ar.bus_bytes, 2 * 7.0 / 8.0 * kGiB);
  double busbw = 450e9 * 0.82 * SizeEfficiency(kGiB);
  EXPECT_NEAR(ar.seconds, 8.4e-6 + 14 * 3.4e-6 + ar.bus_bytes / busbw, 1e-12);
}

TEST(CollectiveTimeTest, SmallMessagesPickALowLatencyProtocol) {
  // 8 KiB all_reduce: LL's 6.6 + 14 x 0.6 us dominates; its bytes move at half bandwidth.
  const double bytes = 8 * 1024;
  CollectiveEstimate e = Estimate(CollectiveKind::kAllReduce, bytes, SingleNodeGroup(8));
  EXPECT_EQ(e.protocol, NcclProtocol::kLL);
  double bus = bytes * 2 * 7 / 8;
  double ll_busbw = 450e9 * 0.82 * SizeEfficiency(bytes) * 0.5;
  EXPECT_NEAR(e.seconds, 6.6e-6 + 14 * 0.6e-6 + bus / ll_busbw, 1e-12);
  EXPECT_LT(e.seconds, 50e-6);  // latency-bound: a few tens of microseconds
}

TEST(CollectiveTimeTest, ProtocolChoiceIsTheFastest) {
  const HardwareSpec& hw = H100();
  for (double bytes : {1e3, 1e5, 1e6, 1e7, 1e9}) {
    CollectiveEstimate e = Estimate(CollectiveKind::kAllGather, bytes, SingleNodeGroup(8));
    for (int p = 0; p < kNumNcclProtocols; ++p) {
      double bw = 450e9 * 0.82 * SizeEfficiency(bytes) * hw.nccl_protocol_bandwidth_fraction[p];
      double t = hw.nccl_base_latency_s[p] + 7 * hw.nccl_nvlink_step_latency_s[p] + e.bus_bytes / bw;
      EXPECT_LE(e.seconds, t * (1 + 1e-12)) << bytes << " bytes, protocol " << p;
    }
  }
}

TEST(CollectiveTimeTest, GroupSpanningTwoNodesUsesTheNetwork) {
  // 16 GPUs on 2 nodes: each GPU's NIC (50 GB/s x 0.9) bounds the ring; 5 us per step.
  GroupPlacement two_nodes{16, 2, 8};
  CollectiveEstimate e = Estimate(CollectiveKind::kAllGather, kGiB, two_nodes);
  double busbw = 50e9 * 0.9 * SizeEfficiency(kGiB);
  EXPECT_EQ(e.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(e.seconds, 8.4e-6 + 15 * 5e-6 + (15.0 / 16.0 * kGiB) / busbw, 1e-12);
  // Far slower than the same bytes inside a node.
  EXPECT_GT(e.seconds, 5 * Estimate(CollectiveKind::kAllGather, kGiB, SingleNodeGroup(8)).seconds);
}

TEST(CollectiveTimeTest, ShiftIsPointToPoint) {
  // 256 MiB sent to the next device: one step, p2p bandwidth 140 GB/s.
  const double bytes = 256 * kMiB;
  CollectiveEstimate e = Estimate(CollectiveKind::kSendRecv, bytes, SingleNodeGroup(8));
  EXPECT_EQ(e.steps, 1);
  EXPECT_DOUBLE_EQ(e.bus_bytes, bytes);
  EXPECT_NEAR(e.seconds, 8.4e-6 + 3.4e-6 + bytes / (140e9 * SizeEfficiency(bytes)), 1e-12);
  // Across nodes a shift goes through the NIC.
  CollectiveEstimate net = Estimate(CollectiveKind::kSendRecv, bytes, GroupPlacement{2, 2, 1});
  EXPECT_NEAR(net.seconds, 8.4e-6 + 5e-6 + bytes / (50e9 * 0.9 * SizeEfficiency(bytes)), 1e-12);
}

TEST(CollectiveTimeTest, AllToAllMovesTheOthersShare) {
  CollectiveEstimate e = Estimate(CollectiveKind::kAllToAll, 64 * kMiB, SingleNodeGroup(4));
  EXPECT_DOUBLE_EQ(e.bus_bytes, 64 * kMiB * 3 / 4);
  EXPECT_EQ(e.steps, 3);
}

TEST(CollectiveTimeTest, OneDeviceOrNoBytesCostNothing) {
  EXPECT_EQ(Estimate(CollectiveKind::kAllReduce, kGiB, SingleNodeGroup(1)).seconds, 0);
  EXPECT_EQ(Estimate(CollectiveKind::kAllGather, 0, SingleNodeGroup(8)).seconds, 0);
}

TEST(CollectiveTimeTest, BadInputIsAnError) {
  EXPECT_FALSE(EstimateCollective(H100(), CollectiveKind::kAllGather, -1, SingleNodeGroup(8)).ok());
  EXPECT_FALSE(EstimateCollective(H100(), CollectiveKind::kAllGather, NAN, SingleNodeGroup(8)).ok());
  EXPECT_EQ(EstimateCollective(H100(), CollectiveKind::kAllGather, 1, GroupPlacement{}).status().message(),
            "a collective needs at least one device");
}

TEST(CollectiveTimeTest, CollectiveKindOfOps) {
  EXPECT_EQ(CollectiveKindOf(OpKind::kAllGather), CollectiveKind::kAllGather);
  EXPECT_EQ(CollectiveKindOf(OpKind::kReduceScatter), CollectiveKind::kReduceScatter);
  EXPECT_EQ(CollectiveKindOf(OpKind::kAllReduce), CollectiveKind::kAllReduce);
  EXPECT_EQ(CollectiveKindOf(OpKind::kAllToAll), CollectiveKind::kAllToAll);
  EXPECT_EQ(CollectiveKindOf(OpKind::kShift), CollectiveKind::kSendRecv);
  EXPECT_FALSE(CollectiveKindOf(OpKind::kMatmul).has_value());
}

// calibration.md: p2pBandwidthLatencyTest on HGX H100, 376-380 GB/s one way, 740-750
// both ways (NVIDIA/nccl issue 1264); the model adds a latency of 3 us.
TEST(CollectiveTimeTest, CopyEngineTransferOneWayAndBothWays) {
  const double bytes = 64 * kMiB;
  absl::StatusOr<CopyEngineEstimate> one = EstimateCopyEngineTransfer(H100(), bytes, false);
  absl::StatusOr<CopyEngineEstimate> both = EstimateCopyEngineTransfer(H100(), bytes, true);
  ASSERT_TRUE(one.ok() && both.ok());
  EXPECT_NEAR(one->seconds, 3e-6 + bytes / 378e9, 1e-15);
  EXPECT_NEAR(both->seconds, 3e-6 + bytes / (745e9 / 2), 1e-15);
  EXPECT_DOUBLE_EQ(one->bytes, bytes);
  // Large copies reach the measured bandwidth; NCCL's send/recv (140 GB/s) is far below.
  absl::StatusOr<CopyEngineEstimate> big = EstimateCopyEngineTransfer(H100(), kGiB, false);
  ASSERT_TRUE(big.ok());
  EXPECT_GT(kGiB / big->seconds, 376e9);
  EXPECT_LT(kGiB / big->seconds, 380e9);
  CollectiveEstimate nccl = Estimate(CollectiveKind::kSendRecv, kGiB, SingleNodeGroup(2));
  EXPECT_GT(nccl.seconds, 2.5 * big->seconds);
}

TEST(CollectiveTimeTest, CopyEngineTransferOfNothingTakesNoTimeAndBadSizesAreErrors) {
  absl::StatusOr<CopyEngineEstimate> none = EstimateCopyEngineTransfer(H100(), 0, false);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->seconds, 0);
  EXPECT_FALSE(EstimateCopyEngineTransfer(H100(), -1, false).ok());
  EXPECT_FALSE(EstimateCopyEngineTransfer(H100(), std::nan(""), true).ok());
  EXPECT_FALSE(EstimateCopyEngineTransfer(H100(), INFINITY, true).ok());
}

// NCCL kernels take their channels' SMs; HBM traffic is 2 (3 for reductions) accesses per
// byte over the link, spread over the collective's time.
TEST(CollectiveTimeTest, LoadsOfNcclKernelsAndCopyEngineTransfers) {
  GroupPlacement node = SingleNodeGroup(8);
  CollectiveEstimate ag = Estimate(CollectiveKind::kAllGather, kGiB, node);
  CommunicationLoad gather = NcclLoad(H100(), CollectiveKind::kAllGather, ag);
  EXPECT_EQ(gather.sms, 32);
  EXPECT_DOUBLE_EQ(gather.hbm_bytes_per_s, 2 * (7.0 / 8.0 * kGiB) / ag.seconds);
  CollectiveEstimate rs = Estimate(CollectiveKind::kReduceScatter, kGiB, node);
  EXPECT_DOUBLE_EQ(NcclLoad(H100(), CollectiveKind::kReduceScatter, rs).hbm_bytes_per_s,
                   3 * (7.0 / 8.0 * kGiB) / rs.seconds);
  HardwareSpec hw = H100();
  hw.nccl_p2p_sms = 8;
  CollectiveEstimate sr = Estimate(CollectiveKind::kSendRecv, kGiB, SingleNodeGroup(2));
  EXPECT_EQ(NcclLoad(hw, CollectiveKind::kSendRecv, sr).sms, 8);
  CommunicationLoad ce = CopyEngineLoad(kGiB, 0.5);
  EXPECT_EQ(ce.sms, 0);
  EXPECT_DOUBLE_EQ(ce.hbm_bytes_per_s, 2 * kGiB / 0.5);
  EXPECT_EQ(CopyEngineLoad(0, 0).hbm_bytes_per_s, 0);
}

}  // namespace
}  // namespace commir::sim
