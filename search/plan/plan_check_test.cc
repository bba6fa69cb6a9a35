// The cpu-mesh check of plans (plan_check.h): pipelines even and uneven, interleaved,
// tensor parallel with sequence parallelism, context parallel, data parallel, several
// micro-batches, full recomputation and an 8-device plan match one device; a wrong
// pipeline (a dropped micro-batch gradient, swapped stages) is reported as a mismatch;
// bad requests get clear errors.
#include "search/plan/plan_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"

namespace commir::search::plan {
namespace {

using ::testing::HasSubstr;

// Small models (the presets' dtype is bf16; the check runs f32 whatever it says).
constexpr char kLlama[] =
    "llama3-8b,layers=4,hidden=32,heads=4,kv_heads=2,ffn=64,seq=8,vocab=100,global_batch=8";
constexpr char kGpt[] =
    "gpt3-1.3b,layers=3,hidden=32,heads=4,kv_heads=4,ffn=128,seq=16,vocab=100,global_batch=8";

ModelSpec Model(const char* text) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}

ParallelPlan Plan(const char* text) {
  absl::StatusOr<ParallelPlan> p = ParsePlan(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : ParallelPlan{};
}

PlanCheckResult Check(const char* model, const char* plan, PlanCheckOptions options = {}) {
  absl::StatusOr<PlanCheckResult> r = CheckPlanOnCpuMesh(Model(model), Plan(plan), options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : PlanCheckResult{};
}

// Passes, with every group compared against a reference that is not all zeros (so
// that matching means something): output, input gradient, each layer, the head.
void ExpectMatches(const PlanCheckResult& r, int64_t layers, const char* plan) {
  EXPECT_TRUE(r.pass) << FormatPlanCheck(r, Plan(plan));
  ASSERT_EQ(r.groups.size(), static_cast<size_t>(layers + 3));
  EXPECT_EQ(r.groups[0].name, "output");
  EXPECT_EQ(r.groups[1].name, "input gradient");
  EXPECT_EQ(r.groups.back().name, "head weight gradients");
  for (const TensorGroupCheck& g : r.groups) {
    EXPECT_GT(g.max_reference, 0) << g.name;
    EXPECT_LE(g.max_rel_error, r.tolerance) << g.name;
  }
}

TEST(PlanCheck, EvenPipelineRunsOneFOneB) {
  const PlanCheckResult r = Check(kLlama, "pp=2,mb=2");
  ExpectMatches(r, 4, "pp=2,mb=2");
  EXPECT_EQ(r.devices, 2);
  EXPECT_EQ(r.chunks, 2);
  EXPECT_EQ(r.microbatches, 4);
  ASSERT_EQ(r.rank_schedules.size(), 2u);
  EXPECT_EQ(r.rank_schedules[0], "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(r.rank_schedules[1], "F0 B0 F1 B1 F2 B2 F3 B3");
}

TEST(PlanCheck, UnevenFirstStage) {
  ExpectMatches(Check(kGpt, "pp=2,first=1,mb=2"), 3, "pp=2,first=1,mb=2");
}

TEST(PlanCheck, UnevenLastStage) {
  ExpectMatches(Check(kGpt, "pp=2,last=1,mb=4"), 3, "pp=2,last=1,mb=4");
}

// Any split, not only the ends (the plan search's stage_layers): 6 layers as 1,2,1,2 over
// four ranks, each rank's chunk calling its own layers' weights.
TEST(PlanCheck, AnySplitOverFourRanks) {
  constexpr char kSixLayers[] =
      "llama3-8b,layers=6,hidden=32,heads=4,kv_heads=2,ffn=64,seq=8,vocab=100,global_batch=8";
  const PlanCheckResult r = Check(kSixLayers, "pp=4,layers=1,2,1,2,mb=2");
  ExpectMatches(r, 6, "pp=4,layers=1,2,1,2,mb=2");
  EXPECT_EQ(r.devices, 4);
  EXPECT_EQ(r.chunks, 4);
  EXPECT_EQ(r.rank_schedules.size(), 4u);
  // 2,2,1,1 passes too, and swapping its first two ranks' layers is a mismatch (the fault
  // hook needs equal chunks), so the check sees which layers each rank runs.
  ExpectMatches(Check(kSixLayers, "pp=4,layers=2,2,1,1,mb=2"), 6, "pp=4,layers=2,2,1,1,mb=2");
  PlanCheckOptions swap;
  swap.fault = PlanCheckFault::kSwapFirstStages;
  absl::StatusOr<PlanCheckResult> swapped =
      CheckPlanOnCpuMesh(Model(kSixLayers), Plan("pp=4,layers=2,2,1,1,mb=2"), swap);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_FALSE(swapped->pass);
}

TEST(PlanCheck, InterleavedPipeline) {
  const PlanCheckResult r = Check(kLlama, "pp=2,v=2,mb=2");
  ExpectMatches(r, 4, "pp=2,v=2,mb=2");
  EXPECT_EQ(r.chunks, 4);
  ASSERT_EQ(r.rank_schedules.size(), 2u);
  EXPECT_EQ(r.rank_schedules[0],
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0");
}

TEST(PlanCheck, TensorParallelWithSequenceParallel) {
  ExpectMatches(Check(kLlama, "tp=2,sp,mb=4"), 4, "tp=2,sp,mb=4");
  ExpectMatches(Check(kGpt, "tp=2,sp,mb=4"), 3, "tp=2,sp,mb=4");
}

TEST(PlanCheck, ContextParallel) {
  ExpectMatches(Check(kLlama, "cp=2,mb=4"), 4, "cp=2,mb=4");
  ExpectMatches(Check(kGpt, "cp=2,tp=2,sp,mb=4"), 3, "cp=2,tp=2,sp,mb=4");
}

TEST(PlanCheck, DataParallelSumsReplicas) {
  const PlanCheckResult r = Check(kLlama, "dp=2,mb=2");
  ExpectMatches(r, 4, "dp=2,mb=2");
  EXPECT_EQ(r.microbatches, 2);
}

TEST(PlanCheck, SeveralMicroBatchesOfTwo) {
  const PlanCheckResult r = Check(kGpt, "pp=3,mb=2");
  ExpectMatches(r, 3, "pp=3,mb=2");
  EXPECT_EQ(r.microbatches, 4);
}

TEST(PlanCheck, FullRecomputation) {
  const PlanCheckResult full = Check(kLlama, "tp=2,pp=2,mb=2,recompute=full");
  ExpectMatches(full, 4, "tp=2,pp=2,mb=2,recompute=full");
  EXPECT_GT(full.recomputed_ops, 0);  // the inlined layers' blocks were found
  EXPECT_EQ(Check(kLlama, "tp=2,pp=2,mb=2").recomputed_ops, 0);
}

TEST(PlanCheck, EightDevices) {
  const PlanCheckResult r = Check(kLlama, "tp=2,sp,pp=2,dp=2,mb=1");
  ExpectMatches(r, 4, "tp=2,sp,pp=2,dp=2,mb=1");
  EXPECT_EQ(r.devices, 8);
}

// GPipe's order (every forward, then every backward) matches one device as 1F1B does:
// the order changes only the rounding.
TEST(PlanCheck, OrderDoesNotMatter) {
  PlanCheckOptions gpipe;
  gpipe.order = PipelineOrder::kAllForwardAllBackward;
  const PlanCheckResult r = Check(kLlama, "pp=2,v=2,mb=2", gpipe);
  ExpectMatches(r, 4, "pp=2,v=2,mb=2");
  ASSERT_EQ(r.rank_schedules.size(), 2u);
  EXPECT_EQ(r.rank_schedules[0],
            "F0.0 F1.0 F2.0 F3.0 F0.2 F1.2 F2.2 F3.2 B0.2 B1.2 B2.2 B3.2 B0.0 B1.0 B2.0 B3.0");
  const PlanCheckResult one_f_one_b = Check(kLlama, "pp=2,v=2,mb=2");
  EXPECT_NE(r.rank_schedules, one_f_one_b.rank_schedules);
  for (size_t i = 0; i < r.groups.size(); ++i) {
    EXPECT_EQ(r.groups[i].max_reference, one_f_one_b.groups[i].max_reference);
  }
}

// A lost micro-batch leaves the forward and the input gradient right and every weight
// gradient wrong.
TEST(PlanCheck, DroppedMicrobatchGradientIsAMismatch) {
  PlanCheckOptions options;
  options.fault = PlanCheckFault::kDropMicrobatchGradient;
  const PlanCheckResult r = Check(kLlama, "pp=2,mb=2", options);
  EXPECT_FALSE(r.pass);
  ASSERT_EQ(r.groups.size(), 7u);
  EXPECT_TRUE(r.groups[0].pass);
  EXPECT_TRUE(r.groups[1].pass);
  for (size_t i = 2; i < r.groups.size(); ++i) EXPECT_FALSE(r.groups[i].pass) << r.groups[i].name;
  EXPECT_THAT(FormatPlanCheck(r, Plan("pp=2,mb=2")), HasSubstr("FAIL: "));
}

TEST(PlanCheck, SwappedStagesAreAMismatch) {
  PlanCheckOptions options;
  options.fault = PlanCheckFault::kSwapFirstStages;
  const PlanCheckResult r = Check(kLlama, "pp=2,mb=2", options);
  EXPECT_FALSE(r.pass);
  ASSERT_FALSE(r.groups.empty());
  EXPECT_FALSE(r.groups[0].pass);  // the output
}

TEST(PlanCheck, ReportHasALinePerGroupAndAVerdict) {
  const PlanCheckResult r = Check(kLlama, "pp=2,mb=2");
  const std::string text = FormatPlanCheck(r, Plan("pp=2,mb=2"));
  EXPECT_THAT(text, HasSubstr("layer 3 weight gradients"));
  EXPECT_THAT(text, HasSubstr("max_rel="));
  EXPECT_THAT(text, HasSubstr("PASS: tp=1 cp=1 pp=2 dp=1 mb=2"));
  EXPECT_THAT(text, HasSubstr("matches one device"));
}

TEST(PlanCheck, RefusesModelsTooBigForTheCpu) {
  absl::StatusOr<PlanCheckResult> r =
      CheckPlanOnCpuMesh(Model("llama3-8b,global_batch=8"), Plan("tp=8,pp=4"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("too big for the cpu check"));
  EXPECT_THAT(r.status().message(), HasSubstr("limit of 4000000"));
}

TEST(PlanCheck, RefusesTooManyDevicesAndInvalidPlans) {
  PlanCheckOptions options;
  options.max_devices = 4;
  absl::StatusOr<PlanCheckResult> r =
      CheckPlanOnCpuMesh(Model(kLlama), Plan("tp=2,pp=2,dp=2"), options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("at most 4 devices"));
  r = CheckPlanOnCpuMesh(Model(kLlama), Plan("tp=3"));  // 3 does not divide 4 heads
  EXPECT_FALSE(r.ok());
  PlanCheckOptions swap;
  swap.fault = PlanCheckFault::kSwapFirstStages;
  r = CheckPlanOnCpuMesh(Model(kLlama), Plan("mb=2"), swap);  // one chunk: nothing to swap
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("two chunks"));
}

}  // namespace
}  // namespace commir::search::plan
