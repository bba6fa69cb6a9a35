// NCCL's clamp of its channel count into ncclConfig's [minCTAs, maxCTAs]
// (sim/nccl_ctas.h), against the rule in NCCL's source, case by case.
#include "sim/nccl_ctas.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/hardware.h"

namespace commir::sim {
namespace {

using ::testing::HasSubstr;

TEST(NcclCtasTest, OwnCountIsClampedIntoTheBounds) {
  EXPECT_EQ(NcclChannels(32, 8, 8), 8);    // N: pinned
  EXPECT_EQ(NcclChannels(32, 8, 64), 32);  // own count inside: kept, MIN does nothing
  EXPECT_EQ(NcclChannels(16, 24, 64), 24); // own below MIN: raised
  EXPECT_EQ(NcclChannels(32, 1, 20), 20);  // own above MAX: lowered
}

TEST(NcclCtasTest, AppliesToEveryNcclKernelOfTheHardware) {
  HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  ASSERT_EQ(hw.nccl_collective_sms, 32);
  ASSERT_EQ(hw.nccl_p2p_sms, 32);
  ASSERT_EQ(hw.nccl_nvls_sms, 16);
  ASSERT_TRUE(ApplyNcclCtas(hw, 20, 24).ok());
  EXPECT_EQ(hw.nccl_collective_sms, 24);
  EXPECT_EQ(hw.nccl_p2p_sms, 24);
  EXPECT_EQ(hw.nccl_nvls_sms, 20);
}

TEST(NcclCtasTest, RefusesBoundsThatLeaveNoSmOrAreReversed) {
  HardwareSpec hw = *FindBuiltinHardware("h100-sxm");
  hw.sm_count = 48;
  absl::Status s = ApplyNcclCtas(hw, 48, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nccl_collective_sms"));
  EXPECT_EQ(hw.nccl_collective_sms, 32) << "a refused budget changes nothing";
  EXPECT_FALSE(ApplyNcclCtas(hw, 9, 8).ok());
  EXPECT_FALSE(ApplyNcclCtas(hw, 0, 8).ok());
}

}  // namespace
}  // namespace commir::sim
