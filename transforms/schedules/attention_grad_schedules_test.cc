// ring-attention and ulysses-attention on attention's backward (attention_grad): each
// program (the forward with lse, then attention_grad) is lowered, scheduled, run on the
// cpu mesh and compared with the one-device run; then the schedule's structure. The
// forward attention of each program is rewritten too, as a training step would have it.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/schedules/attention_test_programs.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

using testing::AllOnSideStream;
using testing::AttentionCase;
using testing::ComputeOnMainStream;
using testing::CountLines;
using testing::GlobalAttentionGrad;
using testing::GlobalAttentionGradOnMesh;

// Lowers the case's program, applies `pipeline`, checks it against one device and
// returns the scheduled program (empty on failure).
std::string ExpectMatches(const AttentionCase& c, const std::string& pipeline,
                          const std::string& mesh = "", const std::string& split = "sp") {
  SCOPED_TRACE(absl::StrCat(c.Name(), " ", mesh, " ", pipeline));
  std::string program =
      mesh.empty() ? GlobalAttentionGrad(c) : GlobalAttentionGradOnMesh(c, mesh, split);
  absl::StatusOr<commir::testing::SpmdCheck> check =
      commir::testing::CheckSpmd(program, "attn_grad", {.seed = 13, .pipeline = pipeline});
  if (!check.ok()) {
    ADD_FAILURE() << check.status();
    return "";
  }
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return check->lowered;
}

// The ring's structure: nothing gathered or reduce-scattered; the backward's own shifts
// are k, v, dk, dv before the loop and in it, and the last step's dk, dv going home
// (with the forward ring's 4, or 2 on two devices); one attention_grad per step.
void ExpectRing(const AttentionCase& c, const std::string& ir) {
  const int64_t n = c.devices;
  EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
  EXPECT_EQ(CountLines(ir, "reduce_scatter("), 0) << ir;
  const int forward_shifts = n == 2 ? 2 : 4;
  const int backward_shifts = n == 2 ? 6 : 10;
  EXPECT_EQ(CountLines(ir, "shift("), forward_shifts + backward_shifts) << ir;
  EXPECT_EQ(CountLines(ir, "= attention_grad("), n == 2 ? 2 : 3) << ir;
  EXPECT_TRUE(AllOnSideStream(ir, "shift(")) << ir;
  EXPECT_TRUE(ComputeOnMainStream(ir)) << ir;
}

TEST(RingAttentionGradTest, MatchesOneDevice) {
  for (int64_t n : {2, 4, 8}) {
    for (bool causal : {true, false}) {
      AttentionCase c{.devices = n, .causal = causal, .heads = 4, .kv_heads = 4, .queries = 32,
                      .keys = 32, .head_dim = 8};
      ExpectRing(c, ExpectMatches(c, "ring-attention"));
    }
  }
}

// Grouped queries (4 over 2 and over 1 kv heads), more keys than queries (q_pos counts
// from the end), and bf16 (accumulated in f32).
TEST(RingAttentionGradTest, GqaUnequalLengthsAndBf16MatchOneDevice) {
  for (int64_t kv_heads : {2, 1}) {
    AttentionCase c{.devices = 4, .heads = 4, .kv_heads = kv_heads, .queries = 32, .keys = 32,
                    .head_dim = 8};
    ExpectRing(c, ExpectMatches(c, "ring-attention"));
  }
  AttentionCase longer{.devices = 4, .heads = 4, .kv_heads = 2, .queries = 16, .keys = 32,
                       .head_dim = 8};
  ExpectRing(longer, ExpectMatches(longer, "ring-attention"));
  for (int64_t n : {2, 4, 8}) {
    AttentionCase bf16{.devices = n, .dtype = "bf16", .heads = 4, .kv_heads = 2, .queries = 32,
                       .keys = 32, .head_dim = 8};
    ExpectRing(bf16, ExpectMatches(bf16, "ring-attention"));
  }
}

// zigzag=true on causal attention: the backward ring in the zigzag layout (four chunk
// pairs a step) matches one device, with GQA and bf16, permuting in q, o, lse, dout, k,
// v and out dq, dk, dv (the forward's o and lse exchanges back to contiguous cancel
// against the backward's into zigzag); with the layout declared, no permutation at all.
TEST(RingAttentionGradTest, ZigzagMatchesOneDevice) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {4, 2}) {
      for (bool declared : {false, true}) {
        AttentionCase c{.devices = n, .heads = 4, .kv_heads = kv_heads, .queries = 32,
                        .keys = 32, .head_dim = 8, .zigzag_layout = declared};
        std::string ir = ExpectMatches(c, "ring-attention{zigzag=true}");
        const int steps = n == 2 ? 2 : 3;
        EXPECT_EQ(CountLines(ir, "= attention_grad("), 4 * steps) << ir;
        EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
        EXPECT_EQ(CountLines(ir, "reduce_scatter("), 0) << ir;
        EXPECT_TRUE(AllOnSideStream(ir, "all_to_all(")) << ir;
        if (declared) {
          EXPECT_EQ(CountLines(ir, "all_to_all("), 0) << ir;
        }
      }
    }
  }
  AttentionCase bf16{.devices = 4, .dtype = "bf16", .heads = 4, .kv_heads = 2, .queries = 32,
                     .keys = 32, .head_dim = 8};
  ExpectMatches(bf16, "ring-attention{zigzag=true}");
}

// An odd group cannot take the zigzag layout: the contiguous ring, with a remark.
TEST(RingAttentionGradTest, ZigzagOnAnOddGroupFallsBackWithARemark) {
  AttentionCase c{.devices = 3, .heads = 4, .kv_heads = 2, .queries = 48, .keys = 48, .head_dim = 8};
  std::string ir = ExpectMatches(c, "ring-attention{zigzag=true}");
  EXPECT_EQ(CountLines(ir, "= attention_grad("), 3) << ir;
  std::unique_ptr<Module> module = commir::testing::ParseForTest(GlobalAttentionGrad(c));
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(commir::testing::RunDefaultSpmdPipeline(*module).ok());
  std::vector<std::string> skipped;
  int rewritten = 0;
  ASSERT_TRUE(RingAttention(*module, /*zigzag=*/true, {}, &skipped, &rewritten).ok());
  // The forward's remark, then the backward's.
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[1].find("@attn_grad: attention_grad at"), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[1].find("zigzag needs an even group"), std::string::npos) << skipped[1];
  // The forward, and the backward with its two reduce_scatters.
  EXPECT_EQ(rewritten, 4);
}

// A ring over the leading axis of a sequence split over (a, b), and the double ring: each
// step gathers and reduce-scatters over b, or runs a ring over b in turn.
TEST(RingAttentionGradTest, TwoDimensionalMeshes) {
  AttentionCase c{.heads = 4, .kv_heads = 2, .queries = 32, .keys = 32, .head_dim = 8};
  for (const char* mesh : {"a=2, b=2", "a=4, b=2", "a=2, b=4"}) {
    std::string ir = ExpectMatches(c, "ring-attention{axes=a}", mesh, "(a, b)");
    EXPECT_GT(CountLines(ir, "reduce_scatter("), 0) << ir;
    ir = ExpectMatches(c, "ring-attention{axes=a},ring-attention{axes=b}", mesh, "(a, b)");
    EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
    EXPECT_EQ(CountLines(ir, "reduce_scatter("), 0) << ir;
  }
}

TEST(UlyssesAttentionGradTest, MatchesOneDevice) {
  for (int64_t n : {2, 4, 8}) {
    for (bool causal : {true, false}) {
      AttentionCase c{.devices = n, .causal = causal, .heads = 8, .kv_heads = 8, .queries = 32,
                      .keys = 32, .head_dim = 8};
      std::string ir = ExpectMatches(c, "ulysses-attention");
      EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
      EXPECT_EQ(CountLines(ir, "reduce_scatter("), 0) << ir;
      // Forward: q, k, v in; backward: q, k, v, dout in and dq, dk, dv out. o and lse
      // stay in the head split from forward to backward (their exchanges back and forth
      // cancel, and nothing else reads them in the sequence split).
      EXPECT_EQ(CountLines(ir, "all_to_all("), 3 + 7) << ir;
      EXPECT_EQ(CountLines(ir, "o_heads"), 2) << ir;
      EXPECT_TRUE(AllOnSideStream(ir, "all_to_all(")) << ir;
    }
  }
}

// Grouped queries whose kv heads do not split over the devices (repeated, their
// gradients summed back), bf16, and a 2-D mesh (Ulysses over b, the rest gathered, and
// USP: a ring over a after it).
TEST(UlyssesAttentionGradTest, GqaBf16AndTwoDimensionalMeshes) {
  for (int64_t kv_heads : {4, 2, 1}) {
    AttentionCase c{.devices = 4, .heads = 8, .kv_heads = kv_heads, .queries = 32, .keys = 32,
                    .head_dim = 8};
    ExpectMatches(c, "ulysses-attention");
  }
  AttentionCase bf16{.devices = 4, .dtype = "bf16", .heads = 8, .kv_heads = 2, .queries = 32,
                     .keys = 32, .head_dim = 8};
  ExpectMatches(bf16, "ulysses-attention");
  AttentionCase c{.heads = 8, .kv_heads = 2, .queries = 32, .keys = 32, .head_dim = 8};
  for (const char* mesh : {"a=2, b=2", "a=2, b=4"}) {
    ExpectMatches(c, "ulysses-attention{axes=b}", mesh, "(a, b)");
    std::string ir =
        ExpectMatches(c, "ulysses-attention{axes=b},ring-attention{axes=a}", mesh, "(a, b)");
    EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
    EXPECT_EQ(CountLines(ir, "reduce_scatter("), 0) << ir;
  }
}

// dk used other than by one summing reduce_scatter (here summed whole by an all_reduce,
// or reduce-scattered by max): the schedules leave the backward alone and say why.
TEST(AttentionGradScheduleTest, LeavesUnscatteredGradientsAloneWithARemark) {
  constexpr char kProgram[] = R"(mesh @m(sp=2)

spmd func @g(%q: f32[1, 2, 8@sp, 4], %k: f32[1, 2, 8@sp, 4], %v: f32[1, 2, 8@sp, 4], %o: f32[1, 2, 8@sp, 4], %lse: f32[1, 2, 8@sp], %do: f32[1, 2, 8@sp, 4]) -> (f32[1, 2, 8@sp, 4], f32[1, 2, 8, 4], f32[1, 2, 8, 4]) on @m {
  %k_ag = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 8, 4]
  %v_ag = all_gather(%v) {axis = sp, dim = 2} : f32[1, 2, 8, 4]
  %dq, %dk, %dv = attention_grad(%q, %k_ag, %v_ag, %o, %lse, %do) : (f32[1, 2, 4, 4], f32[1, 2, 8, 4], f32[1, 2, 8, 4])
  %dk_sum = all_reduce(%dk) {axis = sp} : f32[1, 2, 8, 4]
  %dv_sum = all_reduce(%dv) {axis = sp} : f32[1, 2, 8, 4]
  return %dq, %dk_sum, %dv_sum
}
)";
  // The same with dk/dv reduce-scattered by max: not their gradient either.
  std::string max_scatter = absl::StrReplaceAll(
      kProgram, {{"all_reduce(%dk) {axis = sp} : f32[1, 2, 8, 4]",
                  "reduce_scatter(%dk) {axis = sp, dim = 2, reduce = max} : f32[1, 2, 4, 4]"},
                 {"all_reduce(%dv) {axis = sp} : f32[1, 2, 8, 4]",
                  "reduce_scatter(%dv) {axis = sp, dim = 2, reduce = max} : f32[1, 2, 4, 4]"},
                 {"f32[1, 2, 8, 4], f32[1, 2, 8, 4]) on", "f32[1, 2, 8@sp, 4], f32[1, 2, 8@sp, 4]) on"}});
  ASSERT_EQ(CountLines(max_scatter, "reduce = max"), 2) << max_scatter;
  for (const std::string& text : {std::string(kProgram), max_scatter}) {
    for (bool ring : {true, false}) {
      std::unique_ptr<Module> module = commir::testing::ParseForTest(text);
      ASSERT_NE(module, nullptr);
      std::vector<std::string> skipped;
      int rewritten = 0;
      absl::Status status = ring ? RingAttention(*module, false, {}, &skipped, &rewritten)
                                 : UlyssesAttention(*module, {}, &skipped, &rewritten);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(rewritten, 0);
      ASSERT_EQ(skipped.size(), 1u);
      EXPECT_EQ(skipped[0],
                "@g: attention_grad at 6:19: dk and dv are not each reduce-scattered along the "
                "sequence over (sp)");
    }
  }
}

// autodiff (a vector-Jacobian product: the output's cotangent is an argument) of a
// sequence-split causal GQA attention layer, partitioned and ring- or Ulysses-scheduled:
// the gradient function equals the one-device gradient, without a gather left.
TEST(AttentionGradScheduleTest, AutodiffGradientOfASequenceSplitLayer) {
  for (int64_t n : {2, 4, 8}) {
    std::string program = absl::StrFormat(R"(mesh @m(sp=%d)
func @layer(%%q: f32[1, 8, 32@sp, 8], %%k: f32[1, 2, 32@sp, 8], %%v: f32[1, 2, 32@sp, 8]) -> f32[1, 8, 32@sp, 8] {
  %%o = attention(%%q, %%k, %%v) {causal}
  %%y = silu(%%o)
  return %%y
}
)", n);
    std::unique_ptr<Module> module = commir::testing::ParseForTest(program);
    ASSERT_NE(module, nullptr);
    AutodiffOptions options;
    options.seed_cotangents = true;
    absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("layer"), options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::string with_grad = PrintModule(*module);
    for (const char* pipeline : {"ring-attention", "ulysses-attention"}) {
      SCOPED_TRACE(absl::StrCat(n, " devices, ", pipeline));
      absl::StatusOr<commir::testing::SpmdCheck> check =
          commir::testing::CheckSpmd(with_grad, "layer_grad", {.seed = 17, .pipeline = pipeline});
      ASSERT_TRUE(check.ok()) << check.status() << "\n" << with_grad;
      EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
      EXPECT_EQ(CountLines(check->lowered, "all_gather("), 0) << check->lowered;
      EXPECT_GT(CountLines(check->lowered, "attention_grad("), 0) << check->lowered;
    }
  }
}

}  // namespace
}  // namespace commir::schedules
