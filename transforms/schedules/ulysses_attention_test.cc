#include "transforms/schedules/ulysses_attention.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "transforms/schedules/attention_test_programs.h"
#include "testing/spmd_check.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

using testing::AllOnSideStream;
using testing::AttentionCase;
using testing::ComputeOnMainStream;
using testing::CountLines;
using testing::GlobalAttention;

// Lowers the case's global program, applies ulysses-attention and checks it against the
// one-device run; then the structure: q, k, v to heads and the results back, by
// all_to_all on stream 1, and no all_gather.
void ExpectUlyssesMatches(const AttentionCase& c) {
  SCOPED_TRACE(c.Name());
  absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
      GlobalAttention(c), "attn", {.seed = 11, .pipeline = "ulysses-attention"});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  const std::string& ir = check->lowered;
  EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
  EXPECT_EQ(CountLines(ir, "all_to_all("), 3 + (c.lse ? 2 : 1)) << ir;
  EXPECT_EQ(CountLines(ir, "split_dim = 1, concat_dim = 2"), 3) << ir;
  EXPECT_EQ(CountLines(ir, "= attention("), 1) << ir;
  EXPECT_TRUE(AllOnSideStream(ir, "all_to_all(")) << ir;
  EXPECT_TRUE(ComputeOnMainStream(ir)) << ir;
  // kv heads are repeated only when the group does not divide them.
  EXPECT_EQ(CountLines(ir, "broadcast("), c.kv_heads % c.devices == 0 ? 0 : 2) << ir;
}

TEST(UlyssesAttentionTest, MatchesGlobalAttention) {
  for (int64_t n : {2, 4, 8}) {
    for (bool causal : {true, false}) {
      for (const char* dtype : {"f32", "bf16"}) {
        ExpectUlyssesMatches({.devices = n, .causal = causal, .dtype = dtype});
      }
    }
  }
}

// GQA: kv heads divisible by the group, or repeated up to lcm(Hkv, n) when not.
TEST(UlyssesAttentionTest, GroupedQueryAttention) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {1, 2, 4}) {
      ExpectUlyssesMatches({.devices = n, .kv_heads = kv_heads});
    }
  }
  ExpectUlyssesMatches({.devices = 4, .causal = false, .dtype = "bf16", .kv_heads = 2});
}

TEST(UlyssesAttentionTest, SequenceLengthsAndLse) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t s : {32, 256}) {
      ExpectUlyssesMatches({.devices = n, .heads = 8, .kv_heads = 8, .queries = s, .keys = s});
    }
  }
  ExpectUlyssesMatches({.devices = 4, .heads = 4, .kv_heads = 2, .queries = 32, .keys = 64});
  ExpectUlyssesMatches({.devices = 4, .lse = true});
  ExpectUlyssesMatches({.devices = 2, .dtype = "bf16", .kv_heads = 2, .lse = true});
}

// Explicit positions: the whole query sequence starts at the given q_pos, k_pos is kept.
TEST(UlyssesAttentionTest, ExplicitPositions) {
  constexpr char kProgram[] = R"(mesh @m(sp=4)

func @attn(%q: f32[1, 4, 64@sp, 16], %k: f32[1, 4, 64@sp, 16], %v: f32[1, 4, 64@sp, 16]) -> (f32[1, 4, 64@sp, 16], f32[1, 4, 64@sp]) {
  %qp = full() {value = 5} : index
  %kp = full() {value = 20} : index
  %o, %lse = attention(%q, %k, %v, %qp, %kp) {causal}
  return %o, %lse
}
)";
  absl::StatusOr<commir::testing::SpmdCheck> check =
      commir::testing::CheckSpmd(kProgram, "attn", {.pipeline = "ulysses-attention"});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  EXPECT_EQ(CountLines(check->lowered, "all_gather("), 0) << check->lowered;
}

// Heads the group cannot split (H = 4 over 8 devices; H = 6 with Hkv = 3 over 2 is fine,
// over 4 it is not) and causal attention whose q_pos is not the lowered form stay as is.
TEST(UlyssesAttentionTest, LeavesUnsplittableAttentionUnchanged) {
  constexpr char kProgram[] = R"(mesh @m(sp=4)

spmd func @heads(%q: f32[1, 2, 64@sp, 8], %k: f32[1, 2, 64@sp, 8], %v: f32[1, 2, 64@sp, 8]) -> f32[1, 2, 64@sp, 8] {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 64, 8]
  %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 2, 64, 8]
  %o = attention(%q, %kg, %vg)
  return %o
}

spmd func @gqa(%q: f32[1, 6, 64@sp, 8], %k: f32[1, 3, 64@sp, 8], %v: f32[1, 3, 64@sp, 8]) -> f32[1, 6, 64@sp, 8] {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 3, 64, 8]
  %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 3, 64, 8]
  %o = attention(%q, %kg, %vg)
  return %o
}

spmd func @positions(%q: f32[1, 4, 64@sp, 8], %k: f32[1, 4, 64@sp, 8], %v: f32[1, 4, 64@sp, 8]) -> f32[1, 4, 64@sp, 8] {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 4, 64, 8]
  %vg = all_gather(%v) {axis = sp, dim = 2} : f32[1, 4, 64, 8]
  %r = rank() {axis = sp} : index
  %qp = mul(%r, 7) : index
  %o = attention(%q, %kg, %vg, %qp) {causal}
  return %o
}
)";
  std::unique_ptr<Module> module = commir::testing::ParseForTest(kProgram);
  ASSERT_NE(module, nullptr);
  std::string before = PrintModule(*module);
  ASSERT_TRUE(UlyssesAttention(*module).ok());
  EXPECT_EQ(PrintModule(*module), before);
}

}  // namespace
}  // namespace commir::schedules
