// Ring collective-matmul schedules on the cpu backend, whose reduce_scatter rings read
// each step's block of the activation in place (runtime/in_place.h: SliceReadInPlace),
// checked against the single-device program on 2, 4 and 8 devices.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "runtime/in_place.h"
#include "testing/spmd_check.h"

namespace commir::cpu {
namespace {

// The shared mlp example (testdata/schedules/ring_cm_mlp_uni.commir) on a mesh of $N:
// the first GEMM's all_gather and the second's reduce_scatter become rings.
constexpr char kMlp[] = R"(mesh @m(tp=$N)

func @mlp(%x: f32[256@tp, 128], %w1: f32[128, 512@tp], %w2: f32[512@tp, 128]) -> f32[256@tp, 128] {
  %h = matmul(%x, %w1) : f32[256, 512@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[256@tp, 128]
  return %y
}
)";

TEST(RingViewsTest, RingsReadingBlocksInPlaceMatchOneDevice) {
  for (int devices : {2, 4, 8}) {
    for (const char* direction : {"uni", "bi"}) {
      const std::string source = absl::StrReplaceAll(kMlp, {{"$N", absl::StrCat(devices)}});
      testing::SpmdCheckOptions options;
      options.seed = 3;
      options.pipeline = absl::StrCat("ring-collective-matmul{direction=", direction, "}");
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(source, "mlp", options);
      ASSERT_TRUE(check.ok()) << check.status();
      EXPECT_TRUE(check->pass) << devices << " devices, " << direction << "\n"
                               << check->report << check->lowered;
      // The schedule did read blocks in place: the reduce_scatter ring's slices.
      int views = 0;
      WalkOps(check->module->functions()[0]->body(), [&](Operation* op) {
        if (runtime::SliceReadInPlace(*op)) ++views;
      });
      EXPECT_GT(views, 0) << check->lowered;
    }
  }
}

}  // namespace
}  // namespace commir::cpu
