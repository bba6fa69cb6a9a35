// moe_dispatch and moe_collect through propagate-sharding and lower-to-spmd on the cpu
// mesh, against the one-device program, on 1, 2, 4 and 2x4 devices: a top-2 layer whose
// tokens are split (the routing is gathered whole first: a choice's slot counts every
// earlier choice of all tokens) and whose hidden dimension and expert FFN width are split.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

struct MeshCase {
  const char* axes;    // the mesh's axes
  const char* tokens;  // how x's token dimension is laid out
};

constexpr MeshCase kMeshes[] = {
    {"tp=1", "16@tp"}, {"tp=2", "16@tp"}, {"tp=4", "16@tp"}, {"dp=2, tp=4", "16@dp"}};

TEST(MoeLowering, MatchesOneDeviceOnEveryMesh) {
  for (const MeshCase& m : kMeshes) {
    const std::string program = absl::StrCat(
        "mesh @m(", m.axes, R"()
func @f(%x: f32[)",
        m.tokens,
        R"(, 8], %wr: f32[8, 4], %w1: f32[4, 8, 12@tp], %w2: f32[4, 12@tp, 8], %h: f32[16, 8@tp]) -> (f32[16, 8], f32[4, 3, 8]) {
  %logits = matmul(%x, %wr)
  %probs = softmax(%logits) {dim = 1}
  %top, %experts = top_k(%probs) {k = 2}
  %buf = moe_dispatch(%x, %experts) {experts = 4, capacity_factor = 0.75}
  %a = matmul(%buf, %w1)
  %act = silu(%a)
  %out = matmul(%act, %w2)
  %back = moe_collect(%out, %experts)
  %g3 = reshape(%top) : f32[16, 2, 1]
  %weighted = mul(%back, %g3)
  %moe = reduce_sum(%weighted) {dims = [1]}
  %y = add(%x, %moe)
  %hidden_split = moe_dispatch(%h, %experts) {experts = 4, capacity = 3}
  return %y, %hidden_split
}
)");
    for (uint64_t seed : {0, 1}) {
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(program, "f", seed);
      ASSERT_TRUE(check.ok()) << m.axes << ": " << check.status();
      EXPECT_TRUE(check->pass) << m.axes << "\n" << check->report << check->lowered;
      EXPECT_THAT(check->lowered, HasSubstr("moe_dispatch(")) << m.axes;
      EXPECT_THAT(check->lowered, HasSubstr("moe_collect(")) << m.axes;
    }
  }
}

}  // namespace
}  // namespace commir::sharding
