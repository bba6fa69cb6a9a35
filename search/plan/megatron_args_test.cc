#include "search/plan/megatron_args.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "absl/strings/str_join.h"
#include "search/plan/layer_schedule.h"
#include "search/plan/megatron_schedule_args.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"

namespace commir::search::plan {
namespace {

std::string BrokenMegatronRule(const std::vector<std::string>& args);

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
  EXPECT_EQ(BrokenMegatronRule(args->args), "");
  EXPECT_EQ(FormatMegatronArgs(*args),
            "--num-layers 80 \\\n--hidden-size 8192 \\\n--ffn-hidden-size 28672 \\\n"
            "--num-attention-heads 64 \\\n--group-query-attention \\\n"
            "--num-query-groups 8 \\\n--seq-length 8192 \\\n"
            "--max-position-embeddings 8192 \\\n--swiglu \\\n--normalization RMSNorm \\\n"
            "--position-embedding-type rope \\\n--untie-embeddings-and-output-weights \\\n"
            "--disable-bias-linear \\\n--bf16 \\\n--tensor-model-parallel-size 8 \\\n"
            "--pipeline-model-parallel-size 4 \\\n--context-parallel-size 2 \\\n"
            "--sequence-parallel \\\n--cp-comm-type allgather \\\n"
            "--num-layers-per-virtual-pipeline-stage 4 \\\n"
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
  p.zero_stage = 1;
  args = ToMegatronArgs(m, p);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(BrokenMegatronRule(args->args), "");
  EXPECT_NE(FormatMegatronArgs(*args).find("--use-distributed-optimizer"), std::string::npos);
  p.zero_stage = 2;  // Megatron-LM's distributed optimizer keeps the gradients whole
  args = ToMegatronArgs(m, p);
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("no Megatron-LM equivalent"), std::string::npos);
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
  bad.virtual_stages = 2;  // the middle ranks' 9 layers do not make 2 chunks
  EXPECT_NE(error(bad).find("9 layers each do not split into v = 2 chunks"), std::string::npos);
  bad.stage_layers = {7, 9, 9, 7};
  bad.first_stage_layers = bad.last_stage_layers = 0;
  EXPECT_NE(error(bad).find("not combined with interleaving"), std::string::npos);
  // Interleaved with uneven ends: every virtual stage in the layout, the ends' outermost
  // chunks short (6 = 1 + 5 on the first rank, 5 + 1 on the last), no per-stage count flag.
  ParallelPlan interleaved = pipelined;
  interleaved.virtual_stages = 2;
  interleaved.first_stage_layers = interleaved.last_stage_layers = 6;  // 6 + 10 + 10 + 6
  const std::vector<std::string> ends_args = ToMegatronArgs(m, interleaved)->args;
  EXPECT_EQ(after_in(ends_args, "--pipeline-model-parallel-layout"),
            "Et|t*5|t*5|t*5|t*5|t*5|t*5|tL");
  EXPECT_EQ(after_in(ends_args, "--num-layers-per-virtual-pipeline-stage"), "absent");
  EXPECT_EQ(after_in(ends_args, "--decoder-first-pipeline-num-layers"), "absent");
  interleaved.first_stage_layers = interleaved.last_stage_layers = 5;  // 5 + 11 + 11 + 5
  EXPECT_NE(error(interleaved).find("11 layers each do not split into v = 2"), std::string::npos);
  interleaved.pp = 8;
  interleaved.dp = 1;
  interleaved.first_stage_layers = interleaved.last_stage_layers = 1;  // 30 = 6 x 5: 1 a chunk
  interleaved.virtual_stages = 5;
  EXPECT_NE(error(interleaved).find("an end rank's 1 layers leave its v - 1 = 4 inner chunks"),
            std::string::npos);
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

// Megatron-LM's own rules on the arguments this file emits, read in NVIDIA/Megatron-LM
// (commit d98e8a6) megatron/training/arguments.py: --cp-comm-type takes p2p, a2a,
// allgather or a2a+p2p (its help); a2a+p2p needs --hierarchical-context-parallel-sizes,
// whose product must be --context-parallel-size (validate_args' checks); --tp-comm-overlap
// asserts sequence parallelism, which it switches off with tp = 1; --overlap-param-gather
// asserts the distributed optimizer (or FSDP) and --overlap-grad-reduce. Returns the first
// rule broken, "" when none.
std::string BrokenMegatronRule(const std::vector<std::string>& args) {
  auto has = [&](const std::string& flag) {
    return std::find(args.begin(), args.end(), flag) != args.end();
  };
  auto value = [&](const std::string& flag, int offset = 1) -> std::string {
    auto it = std::find(args.begin(), args.end(), flag);
    if (it == args.end() || it + offset >= args.end()) return "";
    return *(it + offset);
  };
  const std::string tp = value("--tensor-model-parallel-size");
  if (has("--overlap-param-gather") &&
      (!has("--use-distributed-optimizer") || !has("--overlap-grad-reduce"))) {
    return "--overlap-param-gather without the distributed optimizer and grad-reduce overlap";
  }
  if (has("--tp-comm-overlap") && (!has("--sequence-parallel") || tp == "1")) {
    return "--tp-comm-overlap without sequence parallelism";
  }
  if (has("--cp-comm-type")) {
    const std::string type = value("--cp-comm-type");
    if (type != "p2p" && type != "a2a" && type != "allgather" && type != "a2a+p2p") {
      return "--cp-comm-type " + type;
    }
    if (type == "a2a+p2p") {
      if (!has("--hierarchical-context-parallel-sizes")) return "a2a+p2p without sizes";
      const int64_t product = std::stoll(value("--hierarchical-context-parallel-sizes", 1)) *
                              std::stoll(value("--hierarchical-context-parallel-sizes", 2));
      if (std::to_string(product) != value("--context-parallel-size")) {
        return "hierarchical sizes whose product is not the cp size";
      }
    }
  }
  return "";
}

// A schedule as --layer-schedule gives it ("" for plain collectives).
Pipeline Schedule(const std::string& text) {
  if (text.empty()) return Pipeline{};
  absl::StatusOr<LayerSchedule> schedule = ParseLayerSchedule(text);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? schedule->passes : Pipeline{};
}

ParallelPlan Llama8bCp4Tp2() {
  ParallelPlan p;
  p.tp = 2;
  p.cp = 4;
  p.dp = 2;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  return p;
}

// What the plan costed is what the arguments run: each attention schedule's
// --cp-comm-type, each collective-matmul schedule's --tp-comm-overlap, and a note where
// Megatron-LM has no equivalent.
TEST(MegatronArgsTest, LayerScheduleBecomesCpCommTypeAndTpCommOverlap) {
  const ModelSpec m = *Preset("llama3-8b");
  const ParallelPlan p = Llama8bCp4Tp2();
  auto run = [&](const std::string& layer, const std::string& head = "") {
    absl::StatusOr<MegatronArgs> args = ToMegatronArgs(m, p, Schedule(layer), Schedule(head));
    EXPECT_TRUE(args.ok()) << args.status();
    EXPECT_EQ(BrokenMegatronRule(args->args), "") << layer;
    return *args;
  };
  auto cp_type = [](const MegatronArgs& a) {
    auto it = std::find(a.args.begin(), a.args.end(), "--cp-comm-type");
    return it == a.args.end() ? std::string("(none)") : *(it + 1);
  };
  auto notes = [](const MegatronArgs& a) { return absl::StrJoin(a.notes, "\n"); };
  auto overlap = [](const MegatronArgs& a) {
    return std::find(a.args.begin(), a.args.end(), "--tp-comm-overlap") != a.args.end();
  };
  MegatronArgs a = run("");  // plain collectives: keys and values all-gathered
  EXPECT_EQ(cp_type(a), "allgather");
  EXPECT_FALSE(overlap(a));
  a = run("ulysses-attention");
  EXPECT_EQ(cp_type(a), "a2a");
  EXPECT_EQ(notes(a).find("no Megatron-LM equivalent"), std::string::npos) << notes(a);
  a = run("ring-attention{zigzag=true}");
  EXPECT_EQ(cp_type(a), "p2p");
  EXPECT_EQ(notes(a).find("load balancing"), std::string::npos);
  a = run("ring-attention");  // Megatron-LM's ring is balanced: said
  EXPECT_EQ(cp_type(a), "p2p");
  EXPECT_NE(notes(a).find("without causal load balancing"), std::string::npos);
  a = run("ulysses-attention,pipeline-collective-matmul{chunks=4,streams=2}");
  EXPECT_EQ(cp_type(a), "a2a");
  EXPECT_TRUE(overlap(a));
  EXPECT_NE(notes(a).find("'pipeline' method with num_splits 4"), std::string::npos) << notes(a);
  a = run("ring-collective-matmul");
  EXPECT_TRUE(overlap(a));
  EXPECT_NE(notes(a).find("'ring_exchange'"), std::string::npos);
  a = run("ring-collective-matmul{direction=bi}");
  EXPECT_NE(notes(a).find("no Megatron-LM equivalent: the plan costs "
                          "ring-collective-matmul{direction=bi}"),
            std::string::npos)
      << notes(a);
  // A sequence split over tp (the hybrid on the cp x tp mesh) is no cp group's.
  a = run("ulysses-attention{axes=tp},ring-attention{axes=cp}");
  EXPECT_NE(notes(a).find("no Megatron-LM equivalent: the plan costs attention as"),
            std::string::npos);
  a = run("", "ring-collective-matmul");
  EXPECT_NE(notes(a).find("output head"), std::string::npos);
  // The emitted lines carry the flags and the notes as comment lines.
  const std::string text = FormatMegatronArgs(run("ulysses-attention,ring-collective-matmul"));
  EXPECT_NE(text.find("--sequence-parallel \\\n--cp-comm-type a2a \\\n--tp-comm-overlap"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n# --tp-comm-overlap: the plan costs"), std::string::npos);
}

// Megatron-LM refuses --tp-comm-overlap without sequence parallelism: a plan costed with a
// collective matmul but without sp gets a note, never the flag.
TEST(MegatronArgsTest, NoTpCommOverlapWithoutSequenceParallelism) {
  const ModelSpec m = *Preset("llama3-8b");
  ParallelPlan p = Llama8bCp4Tp2();
  p.sequence_parallel = false;
  absl::StatusOr<MegatronArgs> args = ToMegatronArgs(m, p, Schedule("ring-collective-matmul"));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(BrokenMegatronRule(args->args), "");
  EXPECT_EQ(std::find(args->args.begin(), args->args.end(), "--tp-comm-overlap"),
            args->args.end());
  EXPECT_NE(absl::StrJoin(args->notes, "|").find("needs --sequence-parallel"), std::string::npos);
}

// Two context axes (outer 2, inner 4): Ulysses inside, a ring across is a2a+p2p with the
// sizes inner first, as arguments.py's help orders them (the first groups adjacent GPUs).
TEST(MegatronArgsTest, HierarchicalContextParallelism) {
  ScheduleMesh mesh;
  mesh.tp = 1;
  mesh.context_axes = {{"cpo", 2}, {"cpi", 4}};
  ScheduleArgs a = MegatronScheduleArgs(
      Schedule("ulysses-attention{axes=cpi},ring-attention{axes=cpo}"), Pipeline{}, mesh);
  std::vector<std::string> args = {"--tensor-model-parallel-size", "1",
                                   "--context-parallel-size", "8"};
  args.insert(args.end(), a.args.begin(), a.args.end());
  EXPECT_EQ(absl::StrJoin(a.args, " "),
            "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 4 2");
  EXPECT_EQ(BrokenMegatronRule(args), "");
  EXPECT_TRUE(a.notes.empty());
  EXPECT_TRUE(a.runs_as_costed);
  // The checker itself refuses what Megatron-LM refuses.
  EXPECT_NE(BrokenMegatronRule({"--context-parallel-size", "8", "--cp-comm-type", "a2a+p2p"}),
            "");
  EXPECT_NE(BrokenMegatronRule({"--tensor-model-parallel-size", "2", "--tp-comm-overlap"}), "");
  EXPECT_NE(BrokenMegatronRule({"--overlap-param-gather", "--overlap-grad-reduce"}), "");
  // The double ring has no cp-comm-type.
  a = MegatronScheduleArgs(Schedule("ring-attention{axes=cpo},ring-attention{axes=cpi}"),
                           Pipeline{}, mesh);
  EXPECT_NE(absl::StrJoin(a.notes, "|").find("no Megatron-LM equivalent"), std::string::npos);
  EXPECT_FALSE(a.runs_as_costed);
  // Two axes written in one option (the pass reads them comma-separated): not one context
  // axis, so not Ulysses inside a ring either.
  a = MegatronScheduleArgs(Schedule("ulysses-attention{axes=\"cpo,cpi\"}"), Pipeline{}, mesh);
  EXPECT_EQ(absl::StrJoin(a.args, " "), "--cp-comm-type a2a");
  EXPECT_TRUE(a.notes.empty()) << absl::StrJoin(a.notes, "|");
  EXPECT_TRUE(a.runs_as_costed);
  // A note that only says how to set it up (the ring_exchange method) is run as costed;
  // the unbalanced ring is not (Megatron-LM runs the balanced one).
  mesh.tp = 2;
  mesh.sequence_parallel = true;
  a = MegatronScheduleArgs(Schedule("ring-collective-matmul"), Pipeline{}, mesh);
  EXPECT_FALSE(a.notes.empty());
  EXPECT_TRUE(a.runs_as_costed) << absl::StrJoin(a.notes, "|");
  a = MegatronScheduleArgs(Schedule("ring-attention"), Pipeline{}, mesh);
  EXPECT_FALSE(a.runs_as_costed);
}

}  // namespace
}  // namespace commir::search::plan
