// The remarks and statistics every registered rewriting pass reports (pass.h): a pass
// asked by name to rewrite something says why it rewrote nothing; cleanups only count.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/pass.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Outcome {
  std::vector<std::string> remarks;
  int64_t rewrites = -1;  // the "rewrites" statistic; -1: the pass keeps none
};

// Runs `pipeline` (one pass) on `program` and returns what the pass reported.
Outcome RunPass(absl::string_view pipeline, absl::string_view program) {
  Outcome outcome;
  std::unique_ptr<Module> module = testing::ParseForTest(program);
  EXPECT_NE(module, nullptr);
  if (module == nullptr) return outcome;
  auto passes = ParsePassPipeline(pipeline, RegisteredPasses());
  EXPECT_TRUE(passes.ok()) << passes.status();
  if (!passes.ok() || passes->size() != 1) return outcome;
  Pass& pass = *(*passes)[0];
  EXPECT_TRUE(pass.Run(*module).ok());
  for (const PassRemark& remark : pass.remarks()) outcome.remarks.push_back(remark.message);
  for (const PassStatistic& statistic : pass.statistics()) {
    if (statistic.name == "rewrites") outcome.rewrites = statistic.value;
  }
  return outcome;
}

// A global MLP: something to propagate and lower, nothing spmd.
constexpr char kGlobalMlp[] = R"(mesh @m(tp=2)
func @mlp(%x: f32[8, 16], %w1: f32[16, 32@tp], %w2: f32[32@tp, 16]) -> f32[8, 16] {
  %h = matmul(%x, %w1)
  %y = matmul(%h, %w2)
  return %y
}
)";

// spmd, with no collective next to a matmul and no attention.
constexpr char kSpmdPlain[] = R"(mesh @m(tp=2)
spmd func @f(%x: f32[4, 8]) -> f32[4, 8] on @m {
  %y = exp(%x)
  return %y
}
)";

// spmd: a gather along M feeding a matmul (both collective-matmul schedules rewrite it).
constexpr char kSpmdGatherMatmul[] = R"(mesh @m(tp=2)
spmd func @g(%a: f32[4, 8], %b: f32[8, 4]) -> f32[8, 4] on @m {
  %ag = all_gather(%a) {axis = tp, dim = 0} : f32[8, 8]
  %c = matmul(%ag, %b)
  return %c
}
)";

// spmd: sequence-parallel attention with gathered k/v; 2 heads over 2 devices.
constexpr char kSpmdGatheredAttention[] = R"(mesh @m(sp=2)
spmd func @attn(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> f32[1, 2, 4, 8] on @m {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 8, 8]
  %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 2, 8, 8]
  %o = attention(%q, %kg, %vg)
  return %o
}
)";

// As above on 4 devices: 2 heads cannot be split over them, so ulysses declines.
constexpr char kSpmdAttentionFewHeads[] = R"(mesh @m(sp=4)
spmd func @heads(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> f32[1, 2, 4, 8] on @m {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 16, 8]
  %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 2, 16, 8]
  %o = attention(%q, %kg, %vg)
  return %o
}
)";

TEST(PassRemarksTest, AttentionSchedulesSayWhereTheyFoundNoGatheredAttention) {
  for (const char* pass : {"ring-attention", "ulysses-attention"}) {
    Outcome spmd = RunPass(pass, kSpmdPlain);
    EXPECT_THAT(spmd.remarks,
                ElementsAre(absl::StrCat("pass '", pass,
                                         "' rewrote nothing: no attention with k/v all-gathered "
                                         "along the sequence in @f")));
    EXPECT_EQ(spmd.rewrites, 0);
    Outcome global = RunPass(pass, kGlobalMlp);
    EXPECT_THAT(global.remarks,
                ElementsAre(absl::StrCat("pass '", pass,
                                         "' rewrote nothing: no attention with k/v all-gathered "
                                         "along the sequence in no spmd function (lower-to-spmd "
                                         "makes them)")));
    Outcome rewritten = RunPass(pass, kSpmdGatheredAttention);
    EXPECT_THAT(rewritten.remarks, IsEmpty()) << pass;
    EXPECT_EQ(rewritten.rewrites, 1) << pass;
  }
}

TEST(PassRemarksTest, UlyssesSaysWhyItKeptTheAttentionsItMatched) {
  Outcome declined = RunPass("ulysses-attention", kSpmdAttentionFewHeads);
  EXPECT_THAT(declined.remarks,
              ElementsAre("pass 'ulysses-attention' rewrote nothing: @heads: attention at 5:8: "
                          "2 heads (2 kv heads) cannot be split over 4 devices"));
  // The ring has no such limit.
  EXPECT_THAT(RunPass("ring-attention", kSpmdAttentionFewHeads).remarks, IsEmpty());
}

TEST(PassRemarksTest, CollectiveMatmulSchedulesSayWhatTheyLookedFor) {
  constexpr char kWhy[] =
      "rewrote nothing: no all_gather -> matmul or matmul -> reduce_scatter pair along a free "
      "matmul dimension (and not yet scheduled on a stream) in @f";
  for (const char* pass : {"pipeline-collective-matmul{chunks=2}", "ring-collective-matmul"}) {
    const std::string name(absl::string_view(pass).substr(0, absl::string_view(pass).find('{')));
    Outcome none = RunPass(pass, kSpmdPlain);
    EXPECT_THAT(none.remarks, ElementsAre(absl::StrCat("pass '", name, "' ", kWhy)));
    Outcome rewritten = RunPass(pass, kSpmdGatherMatmul);
    EXPECT_THAT(rewritten.remarks, IsEmpty()) << pass;
    EXPECT_EQ(rewritten.rewrites, 1) << pass;
  }
  EXPECT_THAT(RunPass("pipeline-collective-matmul{chunks=1}", kSpmdGatherMatmul).remarks,
              ElementsAre("pass 'pipeline-collective-matmul' rewrote nothing: chunks=1 leaves "
                          "every pair unchanged"));
}

TEST(PassRemarksTest, PartitionerPassesRemarkOnlyWithoutAGlobalFunctionWithAMesh) {
  EXPECT_THAT(RunPass("lower-to-spmd", kSpmdPlain).remarks,
              ElementsAre("pass 'lower-to-spmd' rewrote nothing: no global function with a mesh "
                          "(spmd functions are lowered already)"));
  EXPECT_THAT(RunPass("propagate-sharding", kSpmdPlain).remarks,
              ElementsAre("pass 'propagate-sharding' rewrote nothing: no global function with a "
                          "mesh"));
  Outcome lowered = RunPass("lower-to-spmd", kGlobalMlp);
  EXPECT_THAT(lowered.remarks, IsEmpty());
  EXPECT_EQ(lowered.rewrites, 1);
  // %h takes [-, tp] from %w1; %y, free, becomes partial(tp) (its return reduces it).
  Outcome propagated = RunPass("propagate-sharding", kGlobalMlp);
  EXPECT_THAT(propagated.remarks, IsEmpty());
  EXPECT_EQ(propagated.rewrites, 2);
}

TEST(PassRemarksTest, CleanupsCountButDoNotRemark) {
  constexpr char kDuplicates[] = R"(func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0)
  %b = exp(%a)
  %c = exp(%a)
  %d = add(%b, %c)
  %unused = neg(%x)
  return %d
}
)";
  for (const char* pass : {"canonicalize", "cse", "dce"}) {
    Outcome none = RunPass(pass, kSpmdPlain);
    EXPECT_THAT(none.remarks, IsEmpty()) << pass;
    Outcome some = RunPass(pass, kDuplicates);
    EXPECT_THAT(some.remarks, IsEmpty()) << pass;
  }
  EXPECT_EQ(RunPass("canonicalize", kSpmdPlain).rewrites, 0);
  EXPECT_EQ(RunPass("canonicalize", kDuplicates).rewrites, 1);
  EXPECT_EQ(RunPass("cse", kDuplicates).rewrites, 1);
  EXPECT_EQ(RunPass("cse", kSpmdPlain).rewrites, 0);
}

}  // namespace
}  // namespace commir
