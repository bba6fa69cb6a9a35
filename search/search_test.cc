// The search driver: dedupe, determinism, reproducible recipes, the memory filter and
// verification of what it reports.
#include "search/search.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/dim_classes.h"
#include "search/layout_space.h"
#include "search/mesh_shapes.h"
#include "search/recipe_verifier.h"
#include "search/test_programs.h"
#include "sim/hardware.h"
#include "transforms/pass_manager.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"

namespace commir::search {
namespace {

constexpr char kBlock[] = R"(
mesh @m(d=1)
func @block(%x: f32[64, 64], %g: f32[64], %wq: f32[64, 64], %wk: f32[64, 64], %wv: f32[64, 64],
            %wo: f32[64, 64], %w1: f32[64, 128], %w2: f32[128, 64]) -> f32[64, 64] {
  %h = rmsnorm(%x, %g) {eps = 1e-5}
  %q = matmul(%h, %wq) : f32[64, 64]
  %k = matmul(%h, %wk) : f32[64, 64]
  %v = matmul(%h, %wv) : f32[64, 64]
  %q3 = reshape(%q) : f32[64, 4, 16]
  %k3 = reshape(%k) : f32[64, 4, 16]
  %v3 = reshape(%v) : f32[64, 4, 16]
  %qh = transpose(%q3) {perm = [1, 0, 2]} : f32[4, 64, 16]
  %kh = transpose(%k3) {perm = [1, 0, 2]} : f32[4, 64, 16]
  %vh = transpose(%v3) {perm = [1, 0, 2]} : f32[4, 64, 16]
  %q4 = reshape(%qh) : f32[1, 4, 64, 16]
  %k4 = reshape(%kh) : f32[1, 4, 64, 16]
  %v4 = reshape(%vh) : f32[1, 4, 64, 16]
  %o4 = attention(%q4, %k4, %v4) {causal}
  %o3 = reshape(%o4) : f32[4, 64, 16]
  %ot = transpose(%o3) {perm = [1, 0, 2]} : f32[64, 4, 16]
  %o = reshape(%ot) : f32[64, 64]
  %attn = matmul(%o, %wo) : f32[64, 64]
  %r = add(%x, %attn)
  %u = matmul(%r, %w1) : f32[64, 128]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[64, 64]
  %y = add(%r, %d)
  return %y
}
)";


std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> m = ParseModuleOrError(text, "test.commir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

SearchOptions Options(int64_t devices) {
  SearchOptions options;
  options.devices = devices;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.top = 0;
  options.verify = VerifyMode::kNone;
  return options;
}

std::string Summary(const SearchResult& r) {
  std::string out;
  for (const Candidate& c : r.ranked) {
    absl::StrAppend(&out, c.rank, " ", c.layout.mesh.ToString(), " ", c.layout.description, " ",
                    c.PipelineText(), " ", c.time_s, "\n");
  }
  return out;
}

TEST(Search, IsDeterministicAndReportsEachProgramOnce) {
  std::unique_ptr<Module> m = Parse(kBlock);
  SearchOptions options = Options(4);
  options.max_mesh_axes = 1;
  absl::StatusOr<SearchResult> a = Search(*m, options);
  absl::StatusOr<SearchResult> b = Search(*m, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Summary(*a), Summary(*b));
  // Layouts are evaluated in parallel and merged in enumeration order.
  options.threads = 1;
  absl::StatusOr<SearchResult> serial = Search(*m, options);
  options.threads = 3;
  absl::StatusOr<SearchResult> parallel = Search(*m, options);
  ASSERT_TRUE(serial.ok() && parallel.ok());
  EXPECT_EQ(Summary(*serial), Summary(*a));
  EXPECT_EQ(Summary(*parallel), Summary(*a));
  EXPECT_EQ(serial->stats.duplicates, parallel->stats.duplicates);
  EXPECT_GT(a->stats.duplicates, 0);
  EXPECT_EQ(static_cast<int64_t>(a->ranked.size()), a->stats.candidates);
  absl::flat_hash_set<std::string> programs;
  for (const Candidate& c : a->ranked) EXPECT_TRUE(programs.insert(c.SpmdText()).second) << c.PipelineText();
  for (size_t i = 1; i < a->ranked.size(); ++i) {
    EXPECT_LE(a->ranked[i - 1].time_s, a->ranked[i].time_s);
    EXPECT_EQ(a->ranked[i].rank, static_cast<int>(i + 1));
  }
  // Some schedule beyond plain collectives was tried and kept.
  EXPECT_EQ(a->stats.meshes, 1);
  bool scheduled = false;
  for (const Candidate& c : a->ranked) scheduled |= !c.schedule.empty();
  EXPECT_TRUE(scheduled);
}

// What a user does with a candidate: commir-opt --pass-pipeline=<pipeline> on the text of
// the laid-out program. It must print exactly the candidate's program, which the search
// made in memory (copies laid out and scheduled, no text in between).
void ExpectRecipesReproduce(const SearchResult& r) {
  for (const Candidate& c : r.ranked) {
    std::unique_ptr<Module> global = Parse(c.GlobalText());
    ASSERT_NE(global, nullptr) << c.PipelineText();
    absl::StatusOr<Pipeline> pipeline = ParsePipeline(c.PipelineText(), RegisteredPasses());
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    ASSERT_TRUE(RunPipeline(*global, *pipeline, {.verify_each = true}).ok()) << c.PipelineText();
    EXPECT_EQ(PrintModule(*global), c.SpmdText()) << c.PipelineText();
  }
}

TEST(Search, RecipeReproducesTheSpmdProgram) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4);
  options.top = 5;
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranked.size(), 5u);
  ExpectRecipesReproduce(*r);
}

TEST(Search, RecipesOfScheduledAttentionAndInlinedCallsReproduce) {
  // Every candidate of the block (plain and scheduled).
  std::unique_ptr<Module> m = Parse(kBlock);
  const std::string before = PrintModule(*m);
  SearchOptions options = Options(4);
  options.max_mesh_axes = 1;
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  bool scheduled = false;
  for (const Candidate& c : r->ranked) scheduled |= !c.schedule.empty();
  EXPECT_TRUE(scheduled);
  ExpectRecipesReproduce(*r);
  // The search works on copies.
  EXPECT_EQ(PrintModule(*m), before);
  // Inlined calls copy clashing names (%h and %a of the caller and of each call): the
  // recipe's text renames them, and the search's programs must have those names too.
  std::unique_ptr<Module> calls = Parse(R"(
mesh @m(d=1)
func @layer(%x: f32[64, 32], %w: f32[32, 32]) -> f32[64, 32] {
  %h = matmul(%x, %w) : f32[64, 32]
  %a = gelu(%h)
  return %a
}
func @model(%x: f32[64, 32], %w: f32[32, 32]) -> f32[64, 32] {
  %h = call @layer(%x, %w) : f32[64, 32]
  %a = call @layer(%h, %w) : f32[64, 32]
  return %a
}
)");
  ASSERT_NE(calls, nullptr);
  options.top = 8;
  r = Search(*calls, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ranked.empty());
  ExpectRecipesReproduce(*r);
}

TEST(Search, MaxMemoryDropsCandidatesThatDoNotFit) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  absl::StatusOr<SearchResult> all = Search(*m, Options(4));
  ASSERT_TRUE(all.ok());
  std::vector<int64_t> peaks;
  for (const Candidate& c : all->ranked) peaks.push_back(c.peak_memory_bytes);
  std::sort(peaks.begin(), peaks.end());
  SearchOptions options = Options(4);
  options.max_memory_bytes = peaks[peaks.size() / 2];
  absl::StatusOr<SearchResult> fitting = Search(*m, options);
  ASSERT_TRUE(fitting.ok());
  EXPECT_GT(fitting->stats.over_memory, 0);
  EXPECT_EQ(fitting->stats.over_memory + fitting->stats.candidates, all->stats.candidates);
  for (const Candidate& c : fitting->ranked) EXPECT_LE(c.peak_memory_bytes, *options.max_memory_bytes);
}

TEST(Search, VerifiesTheReportedCandidatesAndReportsMismatches) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4);
  options.top = 3;
  options.verify = VerifyMode::kTop;
  int calls = 0;
  options.verifier = [&](const std::string&, const Candidate& c) {
    ++calls;
    return c.rank == 2 ? Verdict{Verdict::State::kMismatched, "result0: off"}
                       : Verdict{Verdict::State::kMatched, ""};
  };
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r->stats.verified, 2);
  EXPECT_EQ(r->stats.mismatched, 1);
  EXPECT_EQ(r->ranked[1].verdict.state, Verdict::State::kMismatched);
}

TEST(Search, TheCpuMeshProvesTheBest) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4);
  options.top = 4;
  options.verify = VerifyMode::kTop;
  options.verifier = CpuMeshVerifier();
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok());
  for (const Candidate& c : r->ranked) {
    EXPECT_EQ(c.verdict.state, Verdict::State::kMatched) << c.PipelineText() << "\n" << c.verdict.detail;
  }
  EXPECT_EQ(r->stats.verified, 4);
}


// The sum over the meshes of the layouts EnumerateLayouts materializes: what the search's
// count must say.
int64_t EnumeratedLayouts(const Module& m, int64_t devices) {
  const Function& f = *m.functions().front();
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
  EXPECT_TRUE(classes.ok());
  int64_t total = 0;
  for (const MeshShape& mesh : MeshShapes(devices)) {
    LayoutSpaceStats stats;
    total += static_cast<int64_t>(EnumerateLayouts(f, *classes, mesh, 3, stats).size());
  }
  return total;
}

std::string Chain(int matmuls) {
  std::string text = "mesh @m(d=1)\nfunc @chain(%x: f32[64, 64]";
  for (int i = 1; i <= matmuls; ++i) absl::StrAppend(&text, ", %w", i, ": f32[64, 64]");
  absl::StrAppend(&text, ") -> f32[64, 64] {\n");
  std::string last = "%x";
  for (int i = 1; i <= matmuls; ++i) {
    absl::StrAppend(&text, "  %h", i, " = matmul(", last, ", %w", i, ") : f32[64, 64]\n");
    last = absl::StrCat("%h", i);
  }
  absl::StrAppend(&text, "  return ", last, "\n}\n");
  return text;
}

TEST(Search, CountsTheSpaceAndRefusesOneOverTheCap) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4);
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t layouts = EnumeratedLayouts(*m, 4);
  EXPECT_EQ(r->stats.layouts_in_space, layouts);
  EXPECT_TRUE(r->stats.layouts_in_space_exact);
  EXPECT_EQ(r->stats.layouts, layouts);
  EXPECT_FALSE(r->stats.cut_short);

  options.max_layouts = layouts - 1;
  r = Search(*m, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr(absl::StrCat("@mlp has ", layouts, " layouts on 4 devices")));
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr(absl::StrCat("more than --max-layouts=", layouts - 1)));
  options.max_layouts = layouts;
  EXPECT_TRUE(Search(*m, options).ok());

  // The default cap shrinks with the device count (a layout's simulation grows with it):
  // on 1024 devices the MLP's space is refused.
  EXPECT_EQ(DefaultMaxLayouts(1), 20000);
  EXPECT_EQ(DefaultMaxLayouts(8), 20000);
  EXPECT_EQ(DefaultMaxLayouts(64), 2500);
  EXPECT_EQ(DefaultMaxLayouts(1024), 156);
  std::unique_ptr<Module> wide = Parse(R"(
mesh @m(d=1)
func @mlp(%x: f32[256, 128], %w1: f32[128, 512], %w2: f32[512, 128]) -> f32[256, 128] {
  %u = matmul(%x, %w1) : f32[256, 512]
  %a = gelu(%u)
  %y = matmul(%a, %w2) : f32[256, 128]
  return %y
}
)");
  r = Search(*wide, Options(1024));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr(absl::StrCat("@mlp has ", EnumeratedLayouts(*wide, 1024),
                                                " layouts on 1024 devices")));
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("more than --max-layouts=156 (the default on 1024 devices"));

  // 16 chained matmuls on 8 devices: hundreds of millions of layouts, refused after
  // counting a million, without searching any.
  std::unique_ptr<Module> chain = Parse(Chain(16));
  r = Search(*chain, Options(8));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("@chain has more than 1000000 layouts on 8 devices (4 meshes"));
}

TEST(Search, HoldsOnlyABatchOfLayoutsAndTheTopCandidates) {
  std::unique_ptr<Module> m = Parse(kBlock);
  SearchOptions options = Options(4);
  options.threads = 1;
  absl::StatusOr<SearchResult> all = Search(*m, options);
  ASSERT_TRUE(all.ok()) << all.status();
  options.top = 3;
  absl::StatusOr<SearchResult> top = Search(*m, options);
  ASSERT_TRUE(top.ok()) << top.status();
  // The same best three as ranking everything.
  ASSERT_EQ(top->ranked.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(top->ranked[i].layout.description, all->ranked[i].layout.description);
    EXPECT_EQ(top->ranked[i].PipelineText(), all->ranked[i].PipelineText());
    EXPECT_EQ(top->ranked[i].layout.mesh.ToString(), all->ranked[i].layout.mesh.ToString());
  }
  EXPECT_EQ(top->stats.candidates, all->stats.candidates);
  EXPECT_EQ(top->stats.duplicates, all->stats.duplicates);
  // A batch of 16 layouts per thread, and the top candidates plus one batch's.
  EXPECT_GT(all->stats.layouts, 16);
  EXPECT_LE(top->stats.peak_layouts_held, 16);
  EXPECT_LT(top->stats.peak_candidates_held, all->stats.candidates);
  EXPECT_EQ(all->stats.peak_candidates_held, all->stats.candidates);
}

TEST(Search, TimeLimitStopsAndReportsTheBestSoFar) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4);
  options.threads = 1;
  options.time_limit_s = 1e-9;  // out before the second layout
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stats.cut_short);
  EXPECT_EQ(r->stats.layouts, 1);
  EXPECT_EQ(r->stats.layouts_in_space, EnumeratedLayouts(*m, 4));
  EXPECT_FALSE(r->ranked.empty());
}

TEST(Search, InlinesCallsFirst) {
  // A model as `commir-search --emit-model` writes it: @model calls @layer.
  constexpr char kModel[] = R"(
func @model(%x: f32[64, 32], %w1: f32[32, 128], %w2: f32[128, 32], %v1: f32[32, 128], %v2: f32[128, 32]) -> f32[64, 32] {
  %y = call @layer(%x, %w1, %w2) : f32[64, 32]
  %z = call @layer(%y, %v1, %v2) : f32[64, 32]
  return %z
}

func @layer(%x: f32[64, 32], %w1: f32[32, 128], %w2: f32[128, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[64, 32]
  %y = add(%x, %d)
  return %y
}
)";
  std::unique_ptr<Module> m = Parse(kModel);
  SearchOptions options = Options(2);
  options.verify = VerifyMode::kTop;
  options.verifier = CpuMeshVerifier();
  options.top = 3;
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->function, "model");  // the function nobody calls
  ASSERT_FALSE(r->ranked.empty());
  EXPECT_EQ(r->ranked.front().GlobalText().find("call"), std::string::npos);
  for (const Candidate& c : r->ranked) {
    EXPECT_EQ(c.verdict.state, Verdict::State::kMatched) << c.PipelineText() << "\n" << c.verdict.detail;
  }
}

TEST(Search, ErrorsSayWhy) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(3);  // 64, 32 and 128 do not split over 3
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("no layout of @mlp splits over 3 devices"));
  options = Options(4);
  options.function = "nope";
  EXPECT_THAT(Search(*m, options).status().message(), ::testing::HasSubstr("no function @nope"));
}

}  // namespace
}  // namespace commir::search
