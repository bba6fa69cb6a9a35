// lower-to-spmd on functions that declare a zigzag sequence layout (`64@sp zigzag`):
// position-independent ops keep the layout without communication, ops that mix along
// the sequence get the value exchanged to the contiguous layout first (one all_to_all),
// and every lowered program matches the one-device run.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& op) {
  int n = 0;
  std::string needle = absl::StrCat(" ", op, "(");
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Lowers `body` in a function on mesh @m(sp=devices) and checks it against the one-device
// run; returns the printed spmd program.
std::string LowerAndCheck(int64_t devices, const std::string& signature, const std::string& body) {
  std::string text = absl::StrFormat("mesh @m(sp=%d)\n\nfunc @f%s {\n%s}\n", devices, signature, body);
  SCOPED_TRACE(text);
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(text, "f", /*seed=*/3);
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return "";
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return check->lowered;
}

TEST(ZigzagLowering, PositionIndependentOpsKeepTheLayout) {
  for (int64_t n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    std::string out = LowerAndCheck(
        n, "(%x: f32[64@sp zigzag, 32], %w: f32[32, 16], %g: f32[16], %b: f32[16]) -> f32[64@sp zigzag, 16]",
        R"(  %h = matmul(%x, %w)
  %a = silu(%h)
  %r = rmsnorm(%a, %g)
  %s = softmax(%r)
  %y = add(%s, %b)
  %z = mul(%y, 0.5)
  %t = sub(%z, %h)
  return %t
)");
    EXPECT_EQ(Count(out, "all_to_all"), 0) << out;
    EXPECT_EQ(Count(out, "all_gather"), 0) << out;
  }
}

// A reduction over the sequence, a result declared contiguous, and an elementwise op with
// an operand split contiguously along the sequence all need positions in order: one
// exchange of the zigzag value, shared by its users.
TEST(ZigzagLowering, SequenceMixingOpsExchangeToContiguous) {
  for (int64_t n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    std::string out = LowerAndCheck(
        n, "(%x: f32[64@sp zigzag, 32], %p: f32[64@sp, 32]) -> (f32[32], f32[64@sp, 32], f32[64@sp zigzag, 32])",
        R"(  %e = exp(%x)
  %s = reduce_sum(%e) {dims = [0]}
  %q = add(%e, %p)
  return %s, %q, %e
)");
    EXPECT_EQ(Count(out, "all_to_all"), 1) << out;
  }
  // Returned contiguous as it came in: exchanged on the way out.
  std::string out = LowerAndCheck(4, "(%x: f32[64@sp zigzag, 32]) -> f32[64@sp, 32]",
                                  "  %e = neg(%x)\n  return %e\n");
  EXPECT_EQ(Count(out, "all_to_all"), 1) << out;
  // And into the zigzag layout from a contiguous argument.
  out = LowerAndCheck(4, "(%x: f32[64@sp, 32]) -> f32[64@sp zigzag, 32]",
                      "  %e = neg(%x)\n  return %e\n");
  EXPECT_EQ(Count(out, "all_to_all"), 1) << out;
}

// Attention reads positions: lowered on the contiguous layout between exchanges (what
// ring-attention{zigzag=true} then removes), with and without GQA.
TEST(ZigzagLowering, AttentionRunsBetweenExchanges) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {4, 1}) {
      SCOPED_TRACE(absl::StrCat(n, " devices, kv heads ", kv_heads));
      std::string kv = absl::StrFormat("f32[1, %d, 64@sp zigzag, 8]", kv_heads);
      std::string out = LowerAndCheck(
          n, absl::StrCat("(%q: f32[1, 4, 64@sp zigzag, 8], %k: ", kv, ", %v: ", kv,
                          ") -> f32[1, 4, 64@sp zigzag, 8]"),
          "  %o = attention(%q, %k, %v) {causal}\n  return %o\n");
      EXPECT_EQ(Count(out, "all_to_all"), 4) << out;
    }
  }
}

// The attention's result is exchanged back into the zigzag layout right after it, so
// the output projection (rows) keeps the layout up to the return.
TEST(ZigzagLowering, AttentionResultStaysZigzagThroughTheProjection) {
  for (int64_t n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    std::string t = "f32[1, 4, 64@sp zigzag, 8]";
    std::string out = LowerAndCheck(
        n, absl::StrCat("(%q: ", t, ", %k: ", t, ", %v: ", t, ", %w: f32[8, 8]) -> ", t),
        "  %o = attention(%q, %k, %v) {causal}\n  %p = matmul(%o, %w)\n  return %p\n");
    EXPECT_EQ(Count(out, "all_to_all"), 4) << out;
    // The exchange back follows the attention, before the matmul.
    EXPECT_LT(out.find(" all_to_all(", out.find(" attention(")), out.find(" matmul(")) << out;
  }
}

// With an odd number of devices the zigzag layout cannot be exchanged in one all_to_all:
// position-independent programs still lower, position-mixing ones get a clear error.
TEST(ZigzagLowering, OddDeviceCounts) {
  std::string out = LowerAndCheck(3, "(%x: f32[48@sp zigzag, 8]) -> f32[48@sp zigzag, 8]",
                                  "  %e = exp(%x)\n  return %e\n");
  EXPECT_EQ(Count(out, "all_to_all"), 0) << out;
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(R"(mesh @m(sp=3)

func @f(%x: f32[48@sp zigzag, 8]) -> f32[8] {
  %s = reduce_sum(%x) {dims = [0]}
  return %s
}
)",
                                                     "f");
  ASSERT_FALSE(check.ok());
  EXPECT_THAT(std::string(check.status().message()), HasSubstr("even number of devices"));
  EXPECT_THAT(std::string(check.status().message()), HasSubstr("'reduce_sum'"));
}

}  // namespace
}  // namespace commir::sharding
