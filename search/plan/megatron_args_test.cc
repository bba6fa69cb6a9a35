#include "search/plan/megatron_args.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"

namespace commir::search::plan {
namespace {

TEST(MegatronArgsTest, Llama70bInterleavedPlan) {
  const ModelSpec m = *Preset("llama3-70b");
  ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.virtual_stages = 5;
  p.dp = 16;
  p.cp = 2;
  p.sequence_parallel = true;
  p.micro_batch = 1;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  ASSERT_TRUE(CheckPlan(m, p).ok()) << CheckPlan(m, p);
  EXPECT_EQ(Microbatches(m, p), 32);
  absl::StatusOr<MegatronArgs> args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(FormatMegatronArgs(*args),
            "--num-layers 80 \\\n--hidden-size 8192 \\\n--ffn-hidden-size 28672 \\\n"
            "--num-attention-heads 64 \\\n--group-query-attention \\\n"
            "--num-query-groups 8 \\\n--seq-length 8192 \\\n"
            "--max-position-embeddings 8192 \\\n--swiglu \\\n--normalization RMSNorm \\\n"
            "--position-embedding-type rope \\\n--untie-embeddings-and-output-weights \\\n"
            "--disable-bias-linear \\\n--bf16 \\\n--tensor-model-parallel-size 8 \\\n"
            "--pipeline-model-parallel-size 4 \\\n--context-parallel-size 2 \\\n"
            "--sequence-parallel \\\n--num-layers-per-virtual-pipeline-stage 4 \\\n"
            "--micro-batch-size 1 \\\n--global-batch-size 512 \\\n"
            "--recompute-granularity selective \\\n--use-distributed-optimizer \\\n"
            "--overlap-param-gather \\\n--overlap-grad-reduce\n"
            "# data-parallel size 16 follows from the world size: launch 1024 processes");
}

// Megatron-LM takes one recomputation for every stage: a per-rank plan is written with its
// heaviest rank's setting and a note naming the per-rank choice.
TEST(MegatronArgsTest, RecomputationPerRankRunsAsTheHeaviestWithANote) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  ParallelPlan p;
  p.pp = 4;
  SetStageRecompute(
      p, {Recompute::kSelective, Recompute::kSelective, Recompute::kNone, Recompute::kNone});
  absl::StatusOr<MegatronArgs> args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok()) << args.status();
  const std::string text = FormatMegatronArgs(*args);
  EXPECT_NE(text.find("--recompute-granularity selective"), std::string::npos) << text;
  EXPECT_EQ(text.find("--recompute-method"), std::string::npos) << text;
  EXPECT_NE(text.find("# the plan recomputes per pipeline rank (selective,selective,none,none, "
                      "rank 0 first)"),
            std::string::npos)
      << text;
  SetStageRecompute(p,
                    {Recompute::kFull, Recompute::kSelective, Recompute::kNone, Recompute::kNone});
  const std::string full = FormatMegatronArgs(*ToMegatronArgs(m, p));
  EXPECT_NE(full.find("--recompute-granularity full \\\n--recompute-method uniform"),
            std::string::npos)
      << full;
  EXPECT_NE(full.find("use the heaviest rank's (full) on all"), std::string::npos) << full;
  // One recomputation for every rank: no note.
  p.stage_recompute.clear();
  EXPECT_EQ(FormatMegatronArgs(*ToMegatronArgs(m, p)).find("per pipeline rank"), std::string::npos);
}

TEST(MegatronArgsTest, GptFullRecomputeAndZeroStages) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  ParallelPlan p;
  p.dp = 4;
  p.micro_batch = 4;
  p.recompute = Recompute::kFull;
  absl::StatusOr<MegatronArgs> args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok()) << args.status();
  const std::string text = FormatMegatronArgs(*args);
  EXPECT_NE(text.find("--recompute-granularity full \\\n--recompute-method uniform \\\n"
                      "--recompute-num-layers 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("--swiglu"), std::string::npos);  // GPT: GELU, LayerNorm, biases
  EXPECT_EQ(text.find("--group-query-attention"), std::string::npos);
  EXPECT_EQ(text.find("--use-distributed-optimizer"), std::string::npos);  // ZeRO 0
  p.zero_stage = 2;
  args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok());
  EXPECT_NE(FormatMegatronArgs(*args).find("--use-distributed-optimizer"), std::string::npos);
  EXPECT_NE(FormatMegatronArgs(*args).find("# ZeRO 2:"), std::string::npos);
  p.zero_stage = 3;
  args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok());
  EXPECT_NE(FormatMegatronArgs(*args).find("--use-torch-fsdp2"), std::string::npos);
  p.pp = 2;  // FSDP2 with pipelining: Megatron-LM cannot
  args = ToMegatronArgs(m, p);
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("FSDP2"), std::string::npos);
}

TEST(MegatronArgsTest, CheckPlanSaysWhichRuleFails) {
  const ModelSpec m = *Preset("llama3-8b");
  auto error = [&](ParallelPlan p) {
    absl::Status s = CheckPlan(m, p);
    return s.ok() ? std::string("accepted") : std::string(s.message());
  };
  ParallelPlan p;
  p.dp = 8;
  EXPECT_EQ(error(p), "accepted");
  ParallelPlan bad = p;
  bad.sequence_parallel = true;
  EXPECT_NE(error(bad).find("sequence parallelism needs tp > 1"), std::string::npos);
  bad = p;
  bad.dp = 3;
  EXPECT_NE(error(bad).find("not a multiple of micro-batch x dp"), std::string::npos);
  bad = p;
  bad.pp = 5;
  EXPECT_NE(error(bad).find("do not split evenly"), std::string::npos);
  bad = p;
  bad.virtual_stages = 2;
  EXPECT_NE(error(bad).find("interleaving needs pp > 1"), std::string::npos);
  bad = p;
  bad.tp = 3;
  EXPECT_NE(error(bad).find("tp does not divide"), std::string::npos);
  bad = p;
  bad.cp = 3;
  EXPECT_NE(error(bad).find("does not split into 3"), std::string::npos);
  ParallelPlan pipelined = p;
  pipelined.pp = 4;
  pipelined.dp = 2;
  pipelined.first_stage_layers = 7;
  pipelined.last_stage_layers = 7;  // 32 layers: 7 + 9 + 9 + 7
  EXPECT_EQ(error(pipelined), "accepted");
  EXPECT_EQ(LayersPerStage(m, pipelined), (std::vector<int64_t>{7, 9, 9, 7}));
  EXPECT_EQ(DescribePlan(pipelined),
            "tp=1 cp=1 pp=4 dp=2 mb=1 zero=0 recompute=none first=7 last=7");
  const std::vector<std::string> args = ToMegatronArgs(m, pipelined)->args;
  auto after = [&](const std::string& flag) {
    auto it = std::find(args.begin(), args.end(), flag);
    return it == args.end() || it + 1 == args.end() ? std::string("absent") : *(it + 1);
  };
  EXPECT_EQ(after("--decoder-first-pipeline-num-layers"), "7");
  EXPECT_EQ(after("--decoder-last-pipeline-num-layers"), "7");
  // Any other split goes as Megatron-LM's layout string, quoted for the shell.
  ParallelPlan any_split = pipelined;
  any_split.first_stage_layers = any_split.last_stage_layers = 0;
  any_split.stage_layers = {9, 8, 7, 8};
  absl::StatusOr<MegatronArgs> layout = ToMegatronArgs(m, any_split);
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto after_in = [](const std::vector<std::string>& a, const std::string& flag) {
    auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? std::string("absent") : *(it + 1);
  };
  EXPECT_EQ(after_in(layout->args, "--pipeline-model-parallel-layout"), "Et*9|t*8|t*7|t*8L");
  EXPECT_EQ(after_in(layout->args, "--decoder-first-pipeline-num-layers"), "absent");
  EXPECT_NE(FormatMegatronArgs(*layout).find(
                "--pipeline-model-parallel-layout 'Et*9|t*8|t*7|t*8L'"),
            std::string::npos);
  // An explicit split with an even middle uses the ends-only flags.
  any_split.stage_layers = {1, 15, 15, 1};
  layout = ToMegatronArgs(m, any_split);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(after_in(layout->args, "--decoder-first-pipeline-num-layers"), "1");
  EXPECT_EQ(after_in(layout->args, "--decoder-last-pipeline-num-layers"), "1");
  EXPECT_EQ(after_in(layout->args, "--pipeline-model-parallel-layout"), "absent");
  any_split.stage_layers = {1, 2, 1, 28};
  EXPECT_EQ(after_in(ToMegatronArgs(m, any_split)->args, "--pipeline-model-parallel-layout"),
            "Et|t*2|t|t*28L");
  bad = pipelined;
  bad.last_stage_layers = 8;  // 17 left for 2 ranks
  EXPECT_NE(error(bad).find("do not split evenly over the other 2 stages"), std::string::npos);
  bad = pipelined;
  bad.virtual_stages = 2;
  EXPECT_NE(error(bad).find("not combined with interleaving"), std::string::npos);
  bad = p;
  bad.first_stage_layers = 4;
  EXPECT_NE(error(bad).find("uneven stages need pp > 1"), std::string::npos);
  bad = pipelined;
  bad.pp = 2;
  bad.dp = 4;
  EXPECT_NE(error(bad).find("hold 14 of the 32 layers"), std::string::npos);
  bad = p;
  bad.zero_stage = 4;
  EXPECT_NE(error(bad).find("ZeRO stage"), std::string::npos);
  EXPECT_FALSE(ToMegatronArgs(m, bad).ok());
  EXPECT_EQ(DescribePlan(p), "tp=1 cp=1 pp=1 dp=8 mb=1 zero=0 recompute=none");
}

}  // namespace
}  // namespace commir::search::plan
