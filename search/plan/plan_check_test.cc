// The cpu-mesh check of plans (plan_check.h): pipelines even and uneven, interleaved,
// tensor parallel with sequence parallelism, context parallel, data parallel, several
// micro-batches, full recomputation and an 8-device plan match one device; a wrong
// pipeline (a dropped micro-batch gradient, swapped stages, GPT's head untied from the
// embedding's table) is reported as a mismatch;
// bad requests get clear errors.
#include "search/plan/plan_check.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/plan/model_program.h"
#include "search/plan/model_reader.h"
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
// that matching means something): the loss, the embedding's, each layer's and the head's
// weight gradients.
void ExpectMatches(const PlanCheckResult& r, int64_t layers, const char* plan) {
  EXPECT_TRUE(r.pass) << FormatPlanCheck(r, Plan(plan));
  ASSERT_EQ(r.groups.size(), static_cast<size_t>(layers + 4));
  EXPECT_EQ(r.groups[0].name, "loss");  // the forward functions' own
  EXPECT_EQ(r.groups[1].name, "loss (backward's re-run)");
  EXPECT_EQ(r.groups[2].name, "embedding weight gradients");
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

// The unfused attention (attention=unfused): its batched matmuls and softmax partitioned
// with the heads over tp, differentiated, and pipelined match one device.
TEST(PlanCheck, UnfusedAttentionWithTensorParallelism) {
  const std::string unfused = std::string(kGpt) + ",attention=unfused";
  ExpectMatches(Check(unfused.c_str(), "tp=2,sp,pp=3,mb=4"), 3, "tp=2,sp,pp=3,mb=4");
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

// Each chunk runs its own rank's recomputation: only rank 0 recomputes here.
TEST(PlanCheck, RecomputationPerRank) {
  const PlanCheckResult first_only = Check(kLlama, "pp=2,mb=2,recompute=full,none");
  ExpectMatches(first_only, 4, "pp=2,mb=2,recompute=full,none");
  const PlanCheckResult both = Check(kLlama, "pp=2,mb=2,recompute=full");
  EXPECT_GT(first_only.recomputed_ops, 0);
  // The full plan recomputes in both ranks' programs, the mixed one in rank 0's only.
  EXPECT_LT(first_only.recomputed_ops, both.recomputed_ops);
}

TEST(PlanCheck, OneDeviceIsSaidToMatchTrivially) {
  const PlanCheckResult r = Check(kLlama, "mb=2");
  ExpectMatches(r, 4, "mb=2");
  EXPECT_THAT(FormatPlanCheck(r, Plan("mb=2")),
              HasSubstr("matches one device trivially (the plan is 1 device"));
  EXPECT_THAT(FormatPlanCheck(Check(kLlama, "pp=2,mb=2"), Plan("pp=2,mb=2")),
              ::testing::Not(HasSubstr("trivially")));
}

// A model file's own functions: read back from the text --emit-model writes.
struct FileFunctions {
  ModelSpec spec;
  PlanCheckOptions options;
};

FileFunctions ReadFile(const char* model, int64_t micro_batch,
                       const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  absl::StatusOr<std::string> text = ModelProgram(Model(model), micro_batch);
  EXPECT_TRUE(text.ok()) << text.status();
  const std::string edited = absl::StrReplaceAll(*text, edits);
  if (!edits.empty()) {
    EXPECT_NE(edited, *text);
  }
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(edited, "m.commir");
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  absl::StatusOr<ModelFromIr> read = ReadModelFromIr(**module, "m.commir", "m", 8);
  EXPECT_TRUE(read.ok()) << read.status();
  if (!read.ok()) return {};
  FileFunctions out;
  out.spec = read->spec;
  out.options.functions = read->functions;
  out.options.layer_name = read->layer_name;
  out.options.head_name = read->head_name;
  out.options.file = "m.commir";
  out.options.micro_batch = read->micro_batch;
  out.options.keep_actual = true;
  return out;
}

// The file's own layer is what runs, on both sides: an extra tanh checks and changes
// the numbers.
TEST(PlanCheck, AModelFileChecksItsOwnFunctions) {
  const FileFunctions plain = ReadFile(kLlama, 2);
  const FileFunctions edited =
      ReadFile(kLlama, 2, {{"%a = mul(%s, %w)", "%a0 = mul(%s, %w) : bf16[2, 8, 64]\n  %a = tanh(%a0)"}});
  for (const char* plan : {"tp=2,sp,pp=2,mb=2", "dp=2,mb=2"}) {
    SCOPED_TRACE(plan);
    absl::StatusOr<PlanCheckResult> a = CheckPlanOnCpuMesh(plain.spec, Plan(plan), plain.options);
    absl::StatusOr<PlanCheckResult> b = CheckPlanOnCpuMesh(edited.spec, Plan(plan), edited.options);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectMatches(*a, 4, plan);
    ExpectMatches(*b, 4, plan);
    ASSERT_EQ(a->actual.size(), b->actual.size());
    EXPECT_NE(a->actual[0], b->actual[0]);  // the output
    EXPECT_NE(a->groups[3].max_reference, b->groups[3].max_reference);  // layer 0's gradients
  }
  // The generated layer (no file) gives the unedited file's numbers.
  PlanCheckOptions generated;
  generated.keep_actual = true;
  absl::StatusOr<PlanCheckResult> g =
      CheckPlanOnCpuMesh(Model(kLlama), Plan("dp=2,mb=2"), generated);
  absl::StatusOr<PlanCheckResult> a =
      CheckPlanOnCpuMesh(plain.spec, Plan("dp=2,mb=2"), plain.options);
  ASSERT_TRUE(g.ok() && a.ok());
  EXPECT_EQ(g->groups[0].max_reference, a->groups[0].max_reference);
}

TEST(PlanCheck, AModelFileRunsAtItsOwnMicroBatch) {
  const FileFunctions plain = ReadFile(kLlama, 2);
  absl::StatusOr<PlanCheckResult> r = CheckPlanOnCpuMesh(plain.spec, Plan("mb=1"), plain.options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("written for micro-batch 2: the plan's mb=1"));
}

// A gradient exactly zero on both sides matches: the MLP's output subtracted from
// itself makes its weights' gradients zero on one device and on the plan alike.
TEST(PlanCheck, AnAllZeroReferenceMatchesAnAllZeroPlan) {
  const FileFunctions zero = ReadFile(
      kLlama, 2,
      {{"%dn = matmul(%a, %w2) : bf16[2, 8, 32]",
        "%dn0 = matmul(%a, %w2) : bf16[2, 8, 32]\n  %dn = sub(%dn0, %dn0) : bf16[2, 8, 32]"}});
  absl::StatusOr<PlanCheckResult> r = CheckPlanOnCpuMesh(zero.spec, Plan("pp=2,mb=2"), zero.options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->pass) << FormatPlanCheck(*r, Plan("pp=2,mb=2"));
  EXPECT_TRUE(r->groups[3].pass);
  EXPECT_EQ(r->groups[3].problem, "");
}

// Against an all-zero reference, a nonzero tensor fails however small it is (there is
// no scale to judge it on), and a zero one matches.
TEST(PlanCheck, CompareAllZeroReference) {
  using runtime::Tensor;
  const Tensor zeros = Tensor::FromFloat(ElementType::kF32, {3}, {0, 0, 0});
  const Tensor tiny = Tensor::FromFloat(ElementType::kF32, {3}, {0, 1e-30f, 0});
  const Tensor ones = Tensor::FromFloat(ElementType::kF32, {3}, {1, 1, 1});
  TensorGroupCheck g = CompareTensorGroup("g", {&zeros, &ones}, {&zeros, &ones}, 1e-4);
  EXPECT_TRUE(g.pass) << g.problem;
  EXPECT_EQ(g.max_abs_error, 0);
  g = CompareTensorGroup("g", {&ones, &tiny}, {&ones, &zeros}, 1e-4);
  EXPECT_FALSE(g.pass);
  EXPECT_THAT(g.problem, HasSubstr("tensor 1's reference is all zero, the plan's is not"));
  const Tensor nan = Tensor::FromFloat(ElementType::kF32, {3}, {0, std::nanf(""), 0});
  g = CompareTensorGroup("g", {&nan}, {&zeros}, 1e-4);
  EXPECT_FALSE(g.pass);
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
  PlanCheckOptions keep;
  keep.keep_actual = true;
  gpipe.keep_actual = true;
  const PlanCheckResult one_f_one_b = Check(kLlama, "pp=2,v=2,mb=2", keep);
  EXPECT_NE(r.rank_schedules, one_f_one_b.rank_schedules);
  // The two orders' own results agree with each other (not only each with the reference).
  const PlanCheckResult gpipe_kept = Check(kLlama, "pp=2,v=2,mb=2", gpipe);
  ASSERT_EQ(gpipe_kept.actual.size(), one_f_one_b.actual.size());
  ASSERT_FALSE(one_f_one_b.actual.empty());
  for (size_t t = 0; t < one_f_one_b.actual.size(); ++t) {
    const std::vector<float>& a = gpipe_kept.actual[t];
    const std::vector<float>& b = one_f_one_b.actual[t];
    ASSERT_EQ(a.size(), b.size());
    float scale = 0;
    for (float f : b) scale = std::max(scale, std::fabs(f));
    ASSERT_GT(scale, 0) << "tensor " << t;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-5 * scale) << "tensor " << t << " element " << i;
    }
  }
}

// A lost micro-batch leaves the loss right and every weight gradient (the embedding's
// too) wrong.
TEST(PlanCheck, DroppedMicrobatchGradientIsAMismatch) {
  PlanCheckOptions options;
  options.fault = PlanCheckFault::kDropMicrobatchGradient;
  const PlanCheckResult r = Check(kLlama, "pp=2,mb=2", options);
  EXPECT_FALSE(r.pass);
  ASSERT_EQ(r.groups.size(), 8u);
  EXPECT_TRUE(r.groups[0].pass);
  EXPECT_TRUE(r.groups[1].pass);
  for (size_t i = 2; i < r.groups.size(); ++i) EXPECT_FALSE(r.groups[i].pass) << r.groups[i].name;
  EXPECT_THAT(FormatPlanCheck(r, Plan("pp=2,mb=2")), HasSubstr("FAIL: "));
}

// GPT's head is the embedding's table: the check ties them on both sides, in one chunk
// (autodiff sums the lookup's and the head's gradients) and across pipeline ranks (the
// last rank's gradient of the table is added to the first's). Run untied, the loss is
// the same (the head reads the same values) but the table's gradient misses the head's
// share.
TEST(PlanCheck, GptTableGradientIncludesTheTiedHeads) {
  for (const char* plan : {"mb=2", "pp=3,mb=2", "tp=2,pp=3,mb=2"}) {
    ExpectMatches(Check(kGpt, plan), 3, plan);
    PlanCheckOptions options;
    options.fault = PlanCheckFault::kUntieHead;
    const PlanCheckResult r = Check(kGpt, plan, options);
    EXPECT_FALSE(r.pass) << plan;
    ASSERT_EQ(r.groups.size(), 7u) << plan;
    EXPECT_TRUE(r.groups[0].pass) << plan;
    EXPECT_EQ(r.groups[2].name, "embedding weight gradients");
    EXPECT_FALSE(r.groups[2].pass) << plan;
    for (size_t i = 3; i < r.groups.size(); ++i) EXPECT_TRUE(r.groups[i].pass) << r.groups[i].name;
  }
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
