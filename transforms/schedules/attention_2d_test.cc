// 2-D attention: the attention schedules' axes= option on meshes of two axes, alone (a
// ring or Ulysses over one axis, the other left gathered) and composed into USP's hybrid
// (Ulysses over the minor axis, a ring over the major one) and the double ring (a ring
// over the major axis whose steps run a ring over the minor one). Every program is
// checked against the one-device run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/printer.h"
#include "runtime/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/schedules/attention_test_programs.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/test_util.h"
#include "testing/spmd_check.h"

namespace commir::schedules {
namespace {

using ::testing::HasSubstr;
using testing::AttentionCase;
using testing::CountLines;
using testing::GlobalAttentionOnMesh;

constexpr char kUsp[] = "ulysses-attention{axes=b},ring-attention{axes=a}";
constexpr char kDoubleRing[] = "ring-attention{axes=a},ring-attention{axes=b}";

struct Mesh2D {
  int64_t a, b;
  std::string Axes() const { return absl::StrFormat("a=%d, b=%d", a, b); }
};

// Lowers `c` with its sequence split over (a, b) of `mesh`, applies `pipeline`, checks
// the numbers and returns the scheduled program (empty on failure).
std::string ExpectMatches(const AttentionCase& c, const Mesh2D& mesh, const std::string& pipeline,
                          const std::string& split = "(a, b)") {
  SCOPED_TRACE(absl::StrCat(c.Name(), " on ", mesh.Axes(), " split ", split, ": ", pipeline));
  absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
      GlobalAttentionOnMesh(c, mesh.Axes(), split), "attn", {.seed = 11, .pipeline = pipeline});
  if (!check.ok()) {
    ADD_FAILURE() << check.status();
    return "";
  }
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return check->lowered;
}

// Attentions that run on the device: one per ring step (na * nb for the double ring).
int Attentions(const std::string& ir) { return CountLines(ir, "= attention("); }

TEST(Attention2DTest, UspMatchesGlobalAttention) {
  for (Mesh2D mesh : {Mesh2D{2, 2}, Mesh2D{2, 4}, Mesh2D{4, 2}}) {
    for (bool causal : {true, false}) {
      std::string ir = ExpectMatches({.causal = causal}, mesh, kUsp);
      // q, k, v to heads and the output back, over b; a ring of shifts over a; no gather.
      EXPECT_EQ(CountLines(ir, "all_to_all("), 4) << ir;
      EXPECT_EQ(CountLines(ir, "axis = b, split_dim = 1"), 3) << ir;
      EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
      EXPECT_GT(CountLines(ir, "shift("), 0) << ir;
      EXPECT_EQ(CountLines(ir, "shift("), CountLines(ir, "{axis = a, stream = 1}")) << ir;
      EXPECT_EQ(Attentions(ir), mesh.a == 2 ? 2 : 3) << ir;
    }
  }
}

TEST(Attention2DTest, DoubleRingMatchesGlobalAttention) {
  for (Mesh2D mesh : {Mesh2D{2, 2}, Mesh2D{2, 4}, Mesh2D{4, 2}}) {
    for (bool causal : {true, false}) {
      std::string ir = ExpectMatches({.causal = causal}, mesh, kDoubleRing);
      EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
      EXPECT_EQ(CountLines(ir, "all_to_all("), 0) << ir;
      // The outer ring shifts over a on stream 2, the inner rings over b on stream 1, so
      // the outer block's transfer runs beside a whole inner ring.
      EXPECT_GT(CountLines(ir, "{axis = a, stream = 2}"), 0) << ir;
      EXPECT_GT(CountLines(ir, "{axis = b, stream = 1}"), 0) << ir;
      EXPECT_EQ(CountLines(ir, "shift("),
                CountLines(ir, "{axis = a, stream = 2}") + CountLines(ir, "{axis = b, stream = 1}"))
          << ir;
      // One inner ring (steps 0, the loop's body and the last) per outer step written.
      int outer_written = mesh.a == 2 ? 2 : 3;
      int inner_written = mesh.b == 2 ? 2 : 3;
      EXPECT_EQ(Attentions(ir), outer_written * inner_written) << ir;
    }
  }
}

TEST(Attention2DTest, GqaBf16AndLse) {
  // GQA with fewer kv heads than b: Ulysses repeats them; the rings keep them as they are.
  AttentionCase gqa = {.heads = 8, .kv_heads = 2};
  AttentionCase bf16 = {.dtype = "bf16", .heads = 4, .kv_heads = 2};
  AttentionCase lse = {.heads = 4, .kv_heads = 4, .lse = true};
  for (const char* pipeline : {kUsp, kDoubleRing}) {
    ExpectMatches(gqa, {2, 4}, pipeline);
    ExpectMatches(bf16, {4, 2}, pipeline);
    ExpectMatches(lse, {2, 2}, pipeline);
  }
  std::string ir = ExpectMatches(gqa, {2, 4}, kUsp);
  EXPECT_EQ(CountLines(ir, "broadcast("), 2) << ir;  // k and v repeated to lcm(2, 4) heads
}

TEST(Attention2DTest, ThreeAxisMeshesComposeTheSameWay) {
  // On a=2 x b=2 x c=2 with the sequence over (a, b, c): axis groups as well as single
  // axes, and a ring over each of the three.
  const std::string global = GlobalAttentionOnMesh({}, "a=2, b=2, c=2", "(a, b, c)");
  for (const char* pipeline :
       {"ulysses-attention{axes=c},ring-attention{axes=\"a,b\"}",
        "ulysses-attention{axes=\"b,c\"},ring-attention{axes=a}",
        "ring-attention{axes=a},ring-attention{axes=\"b,c\"}",
        "ring-attention{axes=a},ring-attention{axes=b},ring-attention{axes=c}",
        "ring-attention{axes=\"a,b\"},ring-attention{axes=c}"}) {
    SCOPED_TRACE(pipeline);
    absl::StatusOr<commir::testing::SpmdCheck> check =
        commir::testing::CheckSpmd(global, "attn", {.seed = 5, .pipeline = pipeline});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    EXPECT_EQ(CountLines(check->lowered, "all_gather("), 0) << check->lowered;
  }
}

TEST(Attention2DTest, CausalWithMoreKeysThanQueries) {
  // The default q_pos (Skv - Sq) must survive both compositions.
  AttentionCase c = {.queries = 32, .keys = 64};
  ExpectMatches(c, {2, 2}, kUsp);
  ExpectMatches(c, {2, 2}, kDoubleRing);
}

TEST(Attention2DTest, OneAxisFormsOnATwoAxisMesh) {
  Mesh2D mesh{2, 4};
  AttentionCase c = {.causal = true};
  // A ring over a alone: each step gathers the b group's blocks into one super-block.
  std::string ring_a = ExpectMatches(c, mesh, "ring-attention{axes=a}");
  EXPECT_EQ(CountLines(ring_a, "all_gather("), 2 * 2) << ring_a;  // k and v, two steps
  EXPECT_EQ(CountLines(ring_a, "axis = b, dim = 2"), 4) << ring_a;
  // Ulysses over b alone: the rest gather over a stays, at the top level.
  std::string ulysses_b = ExpectMatches(c, mesh, "ulysses-attention{axes=b}");
  EXPECT_EQ(CountLines(ulysses_b, "all_gather("), 2) << ulysses_b;
  EXPECT_EQ(CountLines(ulysses_b, "all_to_all("), 4) << ulysses_b;
  // Naming every axis, in either order, is the default ring.
  std::string every = ExpectMatches(c, mesh, "ring-attention");
  EXPECT_EQ(ExpectMatches(c, mesh, "ring-attention{axes=\"a,b\"}"), every);
  EXPECT_EQ(ExpectMatches(c, mesh, "ring-attention{axes=\"b, a\"}"), every);
  // A sequence split over b only: the 1-D ring and zigzag over b, the a axis replicated.
  for (const char* pipeline : {"ring-attention{axes=b}", "ring-attention{axes=b, zigzag=true}",
                               "ulysses-attention{axes=b}"}) {
    std::string ir = ExpectMatches(c, mesh, pipeline, "b");
    EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
  }
  for (bool causal : {true, false}) {
    ExpectMatches({.causal = causal, .dtype = "bf16"}, {4, 2}, "ring-attention{axes=a}");
    ExpectMatches({.causal = causal, .dtype = "bf16"}, {4, 2}, "ulysses-attention{axes=b}");
  }
}

// Attention in a loop body (a step of a ring over other axes, or a user's loop) is
// rewritten in place: the hand-written spmd program runs the same before and after.
TEST(Attention2DTest, AttentionInALoopBodyIsScheduledInPlace) {
  constexpr char kProgram[] = R"(mesh @m(sp=4)

spmd func @f(%q: f32[1, 4, 64@sp, 16], %k: f32[1, 2, 64@sp, 16], %v: f32[1, 2, 64@sp, 16]) -> f32[1, 4, 64@sp, 16] on @m {
  %r = for %i = 0 to 2 step 1 iter(%x = %q) {
    %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 64, 16]
    %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 2, 64, 16]
    %rk = rank() {axis = sp} : index
    %qp = mul(%rk, 16) : index
    %o = attention(%x, %kg, %vg, %qp) {causal} : f32[1, 4, 16, 16]
    yield %o
  } : (f32[1, 4, 16, 16])
  return %r
}
)";
  std::unique_ptr<Module> reference = commir::testing::ParseForTest(kProgram);
  ASSERT_NE(reference, nullptr);
  const Function& f = *reference->FindFunction("f");
  std::vector<runtime::Tensor> inputs = commir::testing::RandomGlobalInputs(f, 3);
  absl::StatusOr<std::vector<runtime::Tensor>> expected = commir::testing::RunWithGlobalInputs(f, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (const char* pipeline : {"ring-attention", "ring-attention{zigzag=true}", "ulysses-attention"}) {
    SCOPED_TRACE(pipeline);
    std::unique_ptr<Module> module = commir::testing::ParseForTest(kProgram);
    ASSERT_NE(module, nullptr);
    ASSERT_TRUE(commir::testing::ApplyPassPipeline(pipeline, *module).ok());
    std::string printed = PrintModule(*module);
    EXPECT_EQ(CountLines(printed, "all_gather("), 0) << printed;
    absl::StatusOr<std::vector<runtime::Tensor>> actual =
        commir::testing::RunWithGlobalInputs(*module->FindFunction("f"), inputs);
    ASSERT_TRUE(actual.ok()) << actual.status() << printed;
    std::string report;
    EXPECT_TRUE(commir::testing::CompareResults(*actual, *expected, &report)) << report << printed;
  }
}

// The attentions a schedule leaves alone, and why.
// `before`: a pipeline applied after lowering, before the schedule.
std::vector<std::string> Skipped(const std::string& global, bool ring, const AxisList& axes,
                                 std::string* printed, bool zigzag = false,
                                 const std::string& before = "") {
  std::unique_ptr<Module> module = commir::testing::ParseForTest(global);
  if (module == nullptr) return {};
  absl::Status lowered = commir::testing::RunDefaultSpmdPipeline(*module);
  if (lowered.ok() && !before.empty()) lowered = commir::testing::ApplyPassPipeline(before, *module);
  if (!lowered.ok()) {
    ADD_FAILURE() << lowered;
    return {};
  }
  std::vector<std::string> skipped;
  absl::Status status = ring ? RingAttention(*module, zigzag, axes, &skipped)
                             : UlyssesAttention(*module, axes, &skipped);
  EXPECT_TRUE(status.ok()) << status;
  *printed = PrintModule(*module);
  return skipped;
}

TEST(Attention2DTest, AxesAScheduleCannotTakeAreReportedAndLeftAlone) {
  std::string global = GlobalAttentionOnMesh({}, "a=2, b=2", "(a, b)");
  std::string printed;
  // A ring over the minor axis would hold strided blocks: the double ring's other order.
  std::vector<std::string> skipped = Skipped(global, true, {"b"}, &printed);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("@attn: attention at"));
  EXPECT_THAT(skipped[0], HasSubstr("axes (b) are not the leading axes of the sequence gather over (a, b)"));
  EXPECT_EQ(CountLines(printed, "all_gather("), 2) << printed;
  EXPECT_EQ(CountLines(printed, "shift("), 0) << printed;
  // Ulysses over the major axis, likewise.
  skipped = Skipped(global, false, {"a"}, &printed);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("not the trailing axes"));
  EXPECT_EQ(CountLines(printed, "all_to_all("), 0) << printed;
  // Ulysses inside the steps of a ring over a: the queries sit by rank(a, b), not by a
  // rank over b, which that form cannot place; left alone, with the reason.
  skipped = Skipped(global, false, {"b"}, &printed, false, "ring-attention{axes=a}");
  ASSERT_EQ(skipped.size(), 2u);  // both steps of the ring over a=2
  EXPECT_THAT(skipped[0], HasSubstr("causal q_pos is not base + rank(b) * 16"));
  EXPECT_EQ(CountLines(printed, "all_to_all("), 0) << printed;
  // Heads that do not divide over the group.
  skipped = Skipped(GlobalAttentionOnMesh({.heads = 3, .kv_heads = 3}, "a=2, b=2", "(a, b)"),
                    false, {"b"}, &printed);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("3 heads (3 kv heads) cannot be split over 2 devices"));
  // An axis the sequence is not split over.
  skipped = Skipped(GlobalAttentionOnMesh({}, "a=2, b=2", "b"), true, {"a"}, &printed);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("k/v are not gathered over axis 'a'"));
  // Zigzag with an axis left gathered falls back to the contiguous ring, and says so.
  skipped = Skipped(global, true, {"a"}, &printed, /*zigzag=*/true);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("zigzag needs the ring to take every gathered axis"));
  // Zigzag in the inner ring of a double ring: the queries sit by rank(a, b).
  skipped = Skipped(global, true, {"b"}, &printed, /*zigzag=*/true, "ring-attention{axes=a}");
  ASSERT_EQ(skipped.size(), 2u);  // both steps of the ring over a=2
  EXPECT_THAT(skipped[0], HasSubstr("zigzag needs q_pos = base + rank(b) * 16; contiguous ring used"));
  // An odd group.
  skipped = Skipped(GlobalAttentionOnMesh({.queries = 48, .keys = 48}, "sp=3", "sp"), true,
                    {}, &printed, /*zigzag=*/true);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("zigzag needs an even group and even local lengths (group 3, 16 queries, 16 keys)"));
  EXPECT_EQ(CountLines(printed, "all_to_all("), 0) << printed;
  EXPECT_GT(CountLines(printed, "shift("), 0) << printed;
}

TEST(Attention2DTest, FunctionWhoseMeshLacksTheAxisIsReported) {
  std::string global = GlobalAttentionOnMesh({}, "sp=4", "sp");
  std::string printed;
  std::vector<std::string> skipped = Skipped(global, true, {"b"}, &printed);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("mesh @m has no axis 'b'"));
}

TEST(Attention2DTest, UnknownAxisFailsNamingPassAndAxis) {
  for (const char* pipeline : {"ring-attention{axes=x}", "ulysses-attention{axes=\"a,x\"}",
                               "ring-attention{axes=\"a,a\"}"}) {
    SCOPED_TRACE(pipeline);
    absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
        GlobalAttentionOnMesh({}, "a=2, b=2", "(a, b)"), "attn", {.pipeline = pipeline});
    ASSERT_FALSE(check.ok());
    EXPECT_EQ(check.status().code(), absl::StatusCode::kFailedPrecondition) << check.status();
    EXPECT_THAT(std::string(check.status().message()),
                HasSubstr(absl::StartsWith(pipeline, "ring") ? "ring-attention: " : "ulysses-attention: "));
    EXPECT_THAT(std::string(check.status().message()),
                HasSubstr(absl::StrContains(pipeline, "a,a") ? "axis 'a' named twice" : "unknown axis 'x'"));
  }
}

}  // namespace
}  // namespace commir::schedules
