#include "sim/collective_op.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::sim {
namespace {

using ::testing::ElementsAre;

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }
constexpr double kMiB = 1024.0 * 1024.0;

// mesh (dp=2, tp=8) on two 8-GPU nodes: tp groups stay in a node, dp groups span both.
constexpr char kProgram[] = R"(mesh @m(dp=2, tp=8)
spmd func @f(%a: f32[128, 1024], %b: f32[1024, 1024]) -> f32[1024, 1024] {
  %g = all_gather(%a) {axis = tp, dim = 0} : f32[1024, 1024]
  %r = all_reduce(%b) {axis = dp} : f32[1024, 1024]
  %s = shift(%b) {axis = tp, offset = 1} : f32[1024, 1024]
  %x = shift(%b) {axis = (dp, tp), offset = 1} : f32[1024, 1024]
  %z = shift(%b) {axis = tp, offset = 8} : f32[1024, 1024]
  %m = matmul(%g, %b)
  return %m
})";

class CollectiveOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(kProgram, "test.commir");
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    function_ = module_->functions().front();
    for (Operation* op : *function_->body()) ops_.push_back(op);
  }
  const Operation& Op(int i) const { return *ops_[i]; }
  CollectiveOpInfo Describe(int i, int64_t device) {
    absl::StatusOr<CollectiveOpInfo> info = DescribeCollectiveOp(Op(i), *function_, device);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : CollectiveOpInfo{};
  }
  double Seconds(int i, int64_t device) {
    absl::StatusOr<CollectiveEstimate> e = EstimateCollectiveOp(H100(), Op(i), *function_, device, 8);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->seconds : -1;
  }
  double Expected(CollectiveKind kind, double bytes, GroupPlacement group) {
    return EstimateCollective(H100(), kind, bytes, group)->seconds;
  }

  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
  std::vector<Operation*> ops_;
};

TEST_F(CollectiveOpTest, AllGatherOverTpIsTheGatheredBufferInsideANode) {
  CollectiveOpInfo info = Describe(0, 10);
  EXPECT_EQ(info.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(info.message_bytes, 4 * kMiB);
  EXPECT_THAT(info.devices, ElementsAre(8, 9, 10, 11, 12, 13, 14, 15));
  EXPECT_DOUBLE_EQ(Seconds(0, 10), Expected(CollectiveKind::kAllGather, 4 * kMiB, SingleNodeGroup(8)));
}

TEST_F(CollectiveOpTest, AllReduceOverDpSpansTheNodes) {
  CollectiveOpInfo info = Describe(1, 3);
  EXPECT_EQ(info.kind, CollectiveKind::kAllReduce);
  EXPECT_THAT(info.devices, ElementsAre(3, 11));
  EXPECT_DOUBLE_EQ(Seconds(1, 3), Expected(CollectiveKind::kAllReduce, 4 * kMiB, GroupPlacement{2, 2, 1}));
}

TEST_F(CollectiveOpTest, ShiftTalksToItsTwoNeighbours) {
  CollectiveOpInfo info = Describe(2, 8);
  EXPECT_EQ(info.kind, CollectiveKind::kSendRecv);
  EXPECT_THAT(info.devices, ElementsAre(8, 9, 15));  // itself, to c+1, from c-1 (wrapped)
  EXPECT_DOUBLE_EQ(Seconds(2, 8), Expected(CollectiveKind::kSendRecv, 4 * kMiB, SingleNodeGroup(3)));
}

TEST_F(CollectiveOpTest, ShiftAcrossTheNodeBoundaryUsesTheNetwork) {
  // Over (dp, tp) device 7 sends to device 8, on the other node; device 3 stays inside.
  EXPECT_THAT(Describe(3, 7).devices, ElementsAre(7, 8, 6));
  EXPECT_DOUBLE_EQ(Seconds(3, 7), Expected(CollectiveKind::kSendRecv, 4 * kMiB, GroupPlacement{3, 2, 2}));
  EXPECT_DOUBLE_EQ(Seconds(3, 3), Expected(CollectiveKind::kSendRecv, 4 * kMiB, SingleNodeGroup(3)));
  EXPECT_GT(Seconds(3, 7), 2 * Seconds(3, 3));
}

TEST_F(CollectiveOpTest, ShiftByTheGroupSizeSendsNothing) {
  EXPECT_THAT(Describe(4, 5).devices, ElementsAre(5));
  EXPECT_EQ(Seconds(4, 5), 0);
}

TEST_F(CollectiveOpTest, BadRequestsAreErrors) {
  EXPECT_EQ(DescribeCollectiveOp(Op(5), *function_, 0).status().message(), "'matmul' is not a collective");
  EXPECT_EQ(DescribeCollectiveOp(Op(0), *function_, 16).status().message(),
            "device 16 is not in mesh @m of 16 devices");
  EXPECT_EQ(EstimateCollectiveOp(H100(), Op(0), *function_, 0, 0).status().message(),
            "gpus per node must be at least 1, got 0");
}

// A ring shift sends each link one way; a bidirectional ring's block shifts both ways; a
// shift between two devices (or by half the axis) has one peer on both ends.
TEST(ShiftLinksTest, OneWayRingsAndBothWayPairs) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(mesh @m(tp=8)
spmd func @f(%b: bf16[1024, 1024]) -> bf16[1024, 1024] {
  %uni = shift(%b) {axis = tp, offset = 1} : bf16[1024, 1024]
  %half = shift(%b) {axis = tp, offset = 4} : bf16[1024, 1024]
  %none = shift(%b) {axis = tp, offset = 8} : bf16[1024, 1024]
  return %uni
}
spmd func @g(%b: bf16[1024, 1024]) -> bf16[1024, 1024] {
  %right = shift(%b) {axis = tp, offset = 1} : bf16[1024, 1024]
  %left = shift(%b) {axis = tp, offset = -1, stream = 1} : bf16[1024, 1024]
  return %right
})", "links.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *module->get()->functions()[0];
  const Function& g = *module->get()->functions()[1];
  std::vector<const Operation*> fo, go;
  for (const Operation* op : *f.body()) fo.push_back(op);
  for (const Operation* op : *g.body()) go.push_back(op);
  auto both_ways = [](const Operation& op, const Function& fn) {
    absl::StatusOr<CollectiveOpInfo> info = DescribeCollectiveOp(op, fn, 3);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() && ShiftUsesLinksBothWays(op, fn, *info);
  };
  EXPECT_FALSE(both_ways(*fo[0], f));
  EXPECT_TRUE(both_ways(*fo[1], f));
  EXPECT_FALSE(both_ways(*fo[2], f));
  EXPECT_TRUE(both_ways(*go[0], g));
  EXPECT_TRUE(both_ways(*go[1], g));
  // 2 MiB at 378 GB/s one way, at 745 / 2 both ways; a shift onto itself sends nothing.
  const double bytes = 2 * kMiB;
  absl::StatusOr<CopyEngineEstimate> uni = EstimateCopyEngineShift(H100(), *fo[0], f, 3);
  absl::StatusOr<CopyEngineEstimate> bi = EstimateCopyEngineShift(H100(), *go[0], g, 3);
  absl::StatusOr<CopyEngineEstimate> none = EstimateCopyEngineShift(H100(), *fo[2], f, 3);
  ASSERT_TRUE(uni.ok() && bi.ok() && none.ok());
  EXPECT_NEAR(uni->seconds, 3e-6 + bytes / 378e9, 1e-15);
  EXPECT_NEAR(bi->seconds, 3e-6 + bytes / (745e9 / 2), 1e-15);
  EXPECT_EQ(none->seconds, 0);
  EXPECT_FALSE(EstimateCopyEngineShift(H100(), *fo[3], f, 3).ok());  // `return`: no shift
}

}  // namespace
}  // namespace commir::sim
