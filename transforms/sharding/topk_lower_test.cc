// top_k through propagate-sharding and lower-to-spmd on the cpu mesh, against the
// one-device program, on 1, 2, 4 and 2x4 devices.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

struct MeshCase {
  const char* axes;  // the mesh's axes
  const char* rows;  // how the leading dimension is laid out
};

constexpr MeshCase kMeshes[] = {
    {"tp=1", "16@tp"}, {"tp=2", "16@tp"}, {"tp=4", "16@tp"}, {"dp=2, tp=4", "16@dp"}};

// The rows split pass through; a split of the selected dimension is gathered first (a
// device holding part of a row cannot know its largest entries), and a matmul's partial
// sum is reduced before the selection. Both results are compared with one device's,
// the indices exactly.
TEST(TopKLowering, MatchesOneDeviceOnEveryMesh) {
  for (const MeshCase& m : kMeshes) {
    const std::string program = absl::StrCat("mesh @m(", m.axes, R"()
func @f(%x: f32[)", m.rows, R"(, 32], %y: f32[16, 32@tp], %w: f32[32@tp, 24]) -> (f32[16, 4], i64[16, 4], f32[16, 3], i64[16, 3], f32[16, 5]) {
  %v, %i = top_k(%x) {k = 4}
  %yv, %yi = top_k(%y) {k = 3}
  %h = matmul(%x, %w)
  %hv, %hi = top_k(%h) {k = 5}
  return %v, %i, %yv, %yi, %hv
}
)");
    for (uint64_t seed : {0, 1}) {
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(program, "f", seed);
      ASSERT_TRUE(check.ok()) << m.axes << ": " << check.status();
      EXPECT_TRUE(check->pass) << m.axes << "\n" << check->report << check->lowered;
      EXPECT_THAT(check->lowered, HasSubstr("top_k(")) << m.axes;
      if (std::string(m.axes) != "tp=1") {
        EXPECT_THAT(check->lowered, HasSubstr("all_gather(")) << m.axes << check->lowered;
      }
    }
  }
}

}  // namespace
}  // namespace commir::sharding
