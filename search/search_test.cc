// The search driver: dedupe, determinism, reproducible recipes, the memory filter and
// verification of what it reports.
#include "search/search.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/recipe_verifier.h"
#include "sim/hardware.h"
#include "transforms/pass_manager.h"
#include "transforms/pass_registry.h"
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

// Cheaper to search (fewer ops and classes): most tests use it, so the suite stays fast
// under ASan.
constexpr char kMlp[] = R"(
mesh @m(d=1)
func @mlp(%x: f32[64, 32], %w1: f32[32, 128], %w2: f32[128, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[64, 32]
  %y = add(%x, %d)
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

std::string Fingerprint(const SearchResult& r) {
  std::string out;
  for (const Candidate& c : r.ranked) {
    absl::StrAppend(&out, c.rank, " ", c.layout.mesh.ToString(), " ", c.layout.description, " ",
                    c.pipeline, " ", c.time_s, "\n");
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
  EXPECT_EQ(Fingerprint(*a), Fingerprint(*b));
  // Layouts are evaluated in parallel and merged in enumeration order.
  options.threads = 1;
  absl::StatusOr<SearchResult> serial = Search(*m, options);
  options.threads = 3;
  absl::StatusOr<SearchResult> parallel = Search(*m, options);
  ASSERT_TRUE(serial.ok() && parallel.ok());
  EXPECT_EQ(Fingerprint(*serial), Fingerprint(*a));
  EXPECT_EQ(Fingerprint(*parallel), Fingerprint(*a));
  EXPECT_EQ(serial->stats.duplicates, parallel->stats.duplicates);
  EXPECT_GT(a->stats.duplicates, 0);
  EXPECT_EQ(static_cast<int64_t>(a->ranked.size()), a->stats.candidates);
  absl::flat_hash_set<std::string> programs;
  for (const Candidate& c : a->ranked) EXPECT_TRUE(programs.insert(c.spmd_text).second) << c.pipeline;
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

TEST(Search, RecipeReproducesTheSpmdProgram) {
  std::unique_ptr<Module> m = Parse(kMlp);
  SearchOptions options = Options(4);
  options.top = 5;
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranked.size(), 5u);
  for (const Candidate& c : r->ranked) {
    // What a user does: commir-opt --pass-pipeline=<pipeline> on the laid-out program.
    std::unique_ptr<Module> global = Parse(c.global_text);
    absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
        ParsePassPipeline(c.pipeline, RegisteredPasses());
    ASSERT_TRUE(passes.ok()) << passes.status();
    PassManager manager;
    manager.set_verify_each(true);
    manager.AddPasses(*std::move(passes));
    ASSERT_TRUE(manager.Run(*global).ok()) << c.pipeline;
    EXPECT_EQ(PrintModule(*global), c.spmd_text) << c.pipeline;
  }
}

TEST(Search, MaxMemoryDropsCandidatesThatDoNotFit) {
  std::unique_ptr<Module> m = Parse(kMlp);
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
  std::unique_ptr<Module> m = Parse(kMlp);
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
  std::unique_ptr<Module> m = Parse(kMlp);
  SearchOptions options = Options(4);
  options.top = 4;
  options.verify = VerifyMode::kTop;
  options.verifier = CpuMeshVerifier();
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok());
  for (const Candidate& c : r->ranked) {
    EXPECT_EQ(c.verdict.state, Verdict::State::kMatched) << c.pipeline << "\n" << c.verdict.detail;
  }
  EXPECT_EQ(r->stats.verified, 4);
}

TEST(Search, ErrorsSayWhy) {
  std::unique_ptr<Module> m = Parse(kMlp);
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
