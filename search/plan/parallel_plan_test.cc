#include "search/plan/parallel_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/plan/model_spec.h"

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

  // Every data-parallel scheme reads back, FSDP keeping the forward's gather (zero=2) too.
  for (int zero : {0, 1, 2, 3}) {
    p.zero_stage = zero;
    back = ParsePlan(DescribePlan(p));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->zero_stage, zero);
  }
}

TEST(ParsePlanTest, AnySplitReadsBackAndFirstLastStaysAShorthand) {
  absl::StatusOr<ParallelPlan> p =
      ParsePlan("tp=2,pp=4,sp,layers=9,8,8,7,recompute=full,none,none,none");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->stage_layers, (std::vector<int64_t>{9, 8, 8, 7}));
  EXPECT_TRUE(p->uneven());
  EXPECT_EQ(DescribePlan(*p),
            "tp=2 cp=1 pp=4 dp=1 sp mb=1 zero=0 recompute=full,none,none,none layers=9,8,8,7");
  absl::StatusOr<ParallelPlan> back = ParsePlan(DescribePlan(*p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(DescribePlan(*back), DescribePlan(*p));
  const ModelSpec m = *Preset("llama3-8b");  // 32 layers
  EXPECT_TRUE(CheckPlan(m, *p).ok()) << CheckPlan(m, *p);
  EXPECT_EQ(LayersPerStage(m, *p), (std::vector<int64_t>{9, 8, 8, 7}));

  // first=/last= still expand to the ends with the rest even.
  absl::StatusOr<ParallelPlan> ends = ParsePlan("pp=4,first=7,last=7");
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_TRUE(CheckPlan(m, *ends).ok());
  EXPECT_EQ(LayersPerStage(m, *ends), (std::vector<int64_t>{7, 9, 9, 7}));
}

// Meta's Llama 3 405B pipeline (The Llama 3 Herd of Models, section 3.3.2: one layer fewer
// on the first and the last stage, so that the first model chunk holds only the embedding
// and the last only the output projection and loss): 126 layers on 16 ranks, interleaved
// over 8 chunks of one layer each.
TEST(CheckPlanTest, InterleavingWithUnevenEndsLeavesTheOuterChunksShort) {
  const ModelSpec m = *Preset("llama3-405b");
  ASSERT_EQ(m.layers, 126);
  absl::StatusOr<ParallelPlan> p =
      ParsePlan("tp=8,pp=16,v=8,dp=128,sp,mb=1,zero=1,first=7,last=7");
  ASSERT_TRUE(p.ok()) << p.status();
  ModelSpec batch = m;
  batch.global_batch = 2048;
  ASSERT_TRUE(CheckPlan(batch, *p).ok()) << CheckPlan(batch, *p);
  const std::vector<int64_t> chunks = ChunkLayers(batch, *p);
  ASSERT_EQ(chunks.size(), 128u);
  EXPECT_EQ(chunks.front(), 0);  // the embedding alone
  EXPECT_EQ(chunks.back(), 0);   // the head alone
  for (size_t c = 1; c + 1 < chunks.size(); ++c) EXPECT_EQ(chunks[c], 1) << c;
  // Interleaving needs the micro-batches (2,048 / 128 = 16) a multiple of pp.
  batch.global_batch = 128 * 8;
  EXPECT_NE(CheckPlan(batch, *p).ToString().find("multiple of pp"), std::string::npos);
}

TEST(CheckPlanTest, SplitNamesEveryRankAndEveryLayer) {
  const ModelSpec m = *Preset("llama3-8b");  // 32 layers
  auto error = [&](absl::string_view text) {
    absl::StatusOr<ParallelPlan> p = ParsePlan(text);
    if (!p.ok()) return std::string(p.status().message());
    absl::Status s = CheckPlan(m, *p);
    return s.ok() ? std::string() : std::string(s.message());
  };
  EXPECT_EQ(error("pp=4,layers=10,8,8,6"), "");
  EXPECT_NE(error("pp=4,layers=10,8,8").find("names 3 ranks, not one per pipeline rank (pp = 4)"),
            std::string::npos);
  EXPECT_NE(error("pp=4,layers=10,8,8,7").find("holds 33 layers, not the model's 32"),
            std::string::npos);
  EXPECT_NE(error("pp=4,layers=16,16,0,0").find("layers needs positive counts, not '0'"),
            std::string::npos);
  EXPECT_NE(error("pp=4,layers=16,8,8").find("names 3 ranks"), std::string::npos);
  EXPECT_NE(error("pp=2,v=2,layers=16,16").find("not combined with interleaving"),
            std::string::npos);
  EXPECT_NE(error("pp=2,layers=20,12,first=20").find("not both"), std::string::npos);
  EXPECT_NE(error("pp=1,layers=32").find("uneven stages need pp > 1"), std::string::npos);
  EXPECT_NE(error("pp=2,layers=x").find("layers needs positive counts, not 'x'"),
            std::string::npos);
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

TEST(ParsePlanTest, RecomputationPerRank) {
  absl::StatusOr<ParallelPlan> p = ParsePlan("tp=8,pp=4,recompute=full,selective,none,none,sp");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->sequence_parallel);
  EXPECT_TRUE(p->mixed_recompute());
  EXPECT_EQ(p->RecomputeOf(0), Recompute::kFull);
  EXPECT_EQ(p->RecomputeOf(1), Recompute::kSelective);
  EXPECT_EQ(p->RecomputeOf(3), Recompute::kNone);
  EXPECT_EQ(p->HeaviestRecompute(), Recompute::kFull);
  EXPECT_EQ(DescribePlan(*p),
            "tp=8 cp=1 pp=4 dp=1 sp mb=1 zero=0 recompute=full,selective,none,none");
  absl::StatusOr<ParallelPlan> back = ParsePlan(DescribePlan(*p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(DescribePlan(*back), DescribePlan(*p));
  EXPECT_EQ(DescribeStageRecompute(*p), "full,selective,none,none");

  // One word still means every rank; equal entries collapse to it.
  ParallelPlan uniform = *ParsePlan("pp=2,recompute=selective");
  EXPECT_FALSE(uniform.mixed_recompute());
  EXPECT_EQ(uniform.RecomputeOf(1), Recompute::kSelective);
  EXPECT_EQ(DescribeStageRecompute(uniform), "selective,selective");
  SetStageRecompute(uniform, {Recompute::kFull, Recompute::kFull});
  EXPECT_TRUE(uniform.stage_recompute.empty());
  EXPECT_EQ(uniform.recompute, Recompute::kFull);
  SetStageRecompute(uniform, {Recompute::kFull, Recompute::kNone});
  EXPECT_EQ(DescribePlan(uniform), "tp=1 cp=1 pp=2 dp=1 mb=1 zero=0 recompute=full,none");

  // A written list of equal entries is the uniform recomputation: one spelling.
  ParallelPlan written = *ParsePlan("pp=2,recompute=full,full");
  EXPECT_TRUE(written.stage_recompute.empty());
  EXPECT_EQ(written.recompute, Recompute::kFull);
  EXPECT_EQ(DescribePlan(written), "tp=1 cp=1 pp=2 dp=1 mb=1 zero=0 recompute=full");
}

TEST(CheckPlanTest, RefusesMoreGpusThanABoundWithoutOverflow) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  // Each size parses (at most 2^30); their product (2^120) would overflow gpus().
  ParallelPlan huge = *ParsePlan("tp=1073741824,cp=1073741824,pp=1073741824,dp=1073741824");
  absl::Status s = CheckPlan(m, huge);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), testing::HasSubstr("exceeds 16777216 GPUs")) << s;
  EXPECT_FALSE(CheckPlan(m, *ParsePlan("tp=4096,dp=8192")).ok());
}

TEST(CheckPlanTest, RecomputationNamesEveryRank) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  // Built in code (ParsePlan refuses such a list itself, RecomputeListMatchesPp below).
  ParallelPlan p = *ParsePlan("pp=4");
  p.stage_recompute = {Recompute::kFull, Recompute::kNone};
  absl::Status s = CheckPlan(m, p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("names 2 ranks, not one per pipeline rank (pp = 4)"),
            std::string::npos)
      << s;
  p = *ParsePlan("pp=4,recompute=full,none,none,none");
  EXPECT_TRUE(CheckPlan(m, p).ok());
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
  EXPECT_NE(error("zero=4").find("zero is 0 (plain data parallelism), 1"), std::string::npos);
  EXPECT_NE(error("recompute=some").find("none, selective or full"), std::string::npos);
  EXPECT_NE(error("recompute=full,some").find("unknown key 'some'"), std::string::npos);
  EXPECT_NE(error(" , ").find("empty"), std::string::npos);
}

TEST(ParsePlanTest, RecomputeListMatchesPp) {
  // A list names every rank, whether its values differ or not.
  for (const char* text : {"pp=2,recompute=full,full,full", "pp=2,recompute=full,none,none",
                           "recompute=full,full"}) {
    absl::StatusOr<ParallelPlan> p = ParsePlan(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_THAT(p.status().message(), testing::HasSubstr("not one per pipeline rank")) << text;
  }
  absl::StatusOr<ParallelPlan> even = ParsePlan("pp=3,recompute=full,full,full");
  ASSERT_TRUE(even.ok()) << even.status();
  EXPECT_EQ(even->recompute, Recompute::kFull);
  EXPECT_TRUE(ParsePlan("pp=2,recompute=full,none").ok());
}

TEST(ParsePlanTest, AKeyGivenTwiceIsRefused) {
  for (const char* text : {"tp=2,tp=4", "pp=2,dp=4,pp=4", "sp,tp=2,sp", "recompute=full,recompute=none",
                           "zero=1,zero=1"}) {
    absl::StatusOr<ParallelPlan> p = ParsePlan(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_THAT(p.status().message(), testing::HasSubstr("given twice")) << text;
  }
}

}  // namespace
}  // namespace commir::search::plan
