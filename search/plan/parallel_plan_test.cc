#include "search/plan/parallel_plan.h"

#include "gtest/gtest.h"

namespace commir::search::plan {
namespace {

TEST(ParsePlanTest, ReadsWhatDescribePlanWrites) {
  ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.virtual_stages = 2;
  p.dp = 12;
  p.sequence_parallel = true;
  p.micro_batch = 2;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  absl::StatusOr<ParallelPlan> back = ParsePlan(DescribePlan(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(DescribePlan(*back), DescribePlan(p));
  EXPECT_EQ(back->virtual_stages, 2);

  ParallelPlan uneven;
  uneven.pp = 4;
  uneven.first_stage_layers = 3;
  uneven.last_stage_layers = 5;
  uneven.recompute = Recompute::kFull;
  back = ParsePlan(DescribePlan(uneven));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(DescribePlan(*back), DescribePlan(uneven));
}

TEST(ParsePlanTest, CommasAnyOrderAndDefaults) {
  absl::StatusOr<ParallelPlan> p = ParsePlan("pp=8,tp=8,dp=12,sp");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tp, 8);
  EXPECT_EQ(p->pp, 8);
  EXPECT_EQ(p->dp, 12);
  EXPECT_TRUE(p->sequence_parallel);
  EXPECT_EQ(p->cp, 1);
  EXPECT_EQ(p->micro_batch, 1);
  EXPECT_EQ(p->zero_stage, 0);
  EXPECT_EQ(p->recompute, Recompute::kNone);
}

TEST(ParsePlanTest, BadInputSaysWhat) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<ParallelPlan> p = ParsePlan(text);
    return p.ok() ? std::string() : std::string(p.status().message());
  };
  EXPECT_NE(error("tp=8,xp=2").find("unknown key 'xp'"), std::string::npos);
  EXPECT_NE(error("tp=eight").find("tp needs a count"), std::string::npos);
  EXPECT_NE(error("tp=-1").find("tp needs a count"), std::string::npos);
  EXPECT_NE(error("tp").find("tp needs a count"), std::string::npos);
  EXPECT_NE(error("zero=4").find("zero is 0, 1, 2 or 3"), std::string::npos);
  EXPECT_NE(error("recompute=some").find("none, selective or full"), std::string::npos);
  EXPECT_NE(error(" , ").find("empty"), std::string::npos);
}

}  // namespace
}  // namespace commir::search::plan
