// attention_grad through the partitioner: each program (attention, then its backward)
// lowered, run on the cpu mesh and compared with the one-device run.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

std::string LowerAndCheck(const std::string& text, uint64_t seed = 0) {
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitionOnly(text, "f", seed);
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return "";
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return check->lowered;
}

// The forward and the backward of one attention over the given mesh, with the given
// types of q, k, v and dout (k and v share one type) and attributes.
std::string Program(const std::string& mesh, const std::string& q, const std::string& kv,
                    const std::string& attrs) {
  return absl::StrCat("mesh @m(", mesh, ")\nfunc @f(%q: ", q, ", %k: ", kv, ", %v: ", kv,
                      ", %do: ", q, ") -> (", q, ", ", kv, ", ", kv, ") {\n",
                      "  %o, %lse = attention(%q, %k, %v) ", attrs, "\n",
                      "  %dq, %dk, %dv = attention_grad(%q, %k, %v, %o, %lse, %do) ", attrs, "\n",
                      "  return %dq, %dk, %dv\n}\n");
}

// The query sequence split (and k, v, dk, dv laid out along it too): each device gathers
// k and v, computes dq for its queries and its queries' share of dk and dv, which are
// reduce-scattered; causal masks at each device's true positions.
int Count(const std::string& text, const std::string& op) {
  int n = 0;
  for (size_t at = text.find(op); at != std::string::npos; at = text.find(op, at + 1)) ++n;
  return n;
}

TEST(AttentionGradLowering, QuerySequenceSplitSumsKeyValueGradients) {
  for (const char* attrs : {"{causal}", "", "{causal, scale = 0.3}"}) {
    for (const char* mesh : {"sp=2", "sp=4"}) {
      SCOPED_TRACE(absl::StrCat(mesh, " ", attrs));
      std::string out = LowerAndCheck(
          Program(mesh, "f32[1, 2, 16@sp, 8]", "f32[1, 2, 16@sp, 8]", attrs), /*seed=*/3);
      EXPECT_THAT(out, HasSubstr(absl::StrCat("attention_grad(%q, %k_ag, %v_ag, %o, %lse, %do",
                                              absl::StartsWith(attrs, "{causal") ? ", %q_pos) " : ") ",
                                              attrs)));
      EXPECT_EQ(Count(out, "reduce_scatter("), 2) << out;
    }
  }
}

// Query heads split inside a key/value head's group (4 query heads over 1 kv head on 2
// devices): dk and dv are summed over the devices' heads.
TEST(AttentionGradLowering, GroupSplitSumsKeyValueGradients) {
  std::string out =
      LowerAndCheck(Program("tp=2", "f32[1, 4@tp, 8, 8]", "f32[1, 1, 8, 8]", "{causal}"), 4);
  EXPECT_THAT(out, HasSubstr("attention_grad("));
  EXPECT_EQ(Count(out, "all_reduce("), 2) << out;
}

// Batch and key/value heads split over the devices with grouped queries (4 query heads
// over 2 kv heads): nothing is communicated for the backward.
TEST(AttentionGradLowering, BatchAndHeadsSplitFreely) {
  for (const char* attrs : {"{causal}", ""}) {
    SCOPED_TRACE(attrs);
    LowerAndCheck(Program("dp=2", "f32[2@dp, 4, 8, 8]", "f32[2@dp, 2, 8, 8]", attrs), 5);
    LowerAndCheck(Program("tp=2", "f32[2, 4@tp, 8, 8]", "f32[2, 2@tp, 8, 8]", attrs), 6);
  }
}

// A 2x4 mesh: batch over dp, the query sequence over tp, grouped heads, causal, in f32
// and with a bf16 forward.
TEST(AttentionGradLowering, TwoByFourMesh) {
  LowerAndCheck(Program("dp=2, tp=4", "f32[2@dp, 4, 16@tp, 8]", "f32[2@dp, 2, 16@tp, 8]", "{causal}"), 7);
  LowerAndCheck(Program("dp=2, tp=4", "f32[2@dp, 4@tp, 8, 8]", "f32[2@dp, 4@tp, 8, 8]", ""), 8);
  LowerAndCheck(Program("dp=2, tp=4", "bf16[2@dp, 4, 16@tp, 8]", "bf16[2@dp, 2, 16@tp, 8]", "{causal}"), 9);
}

}  // namespace
}  // namespace commir::sharding
