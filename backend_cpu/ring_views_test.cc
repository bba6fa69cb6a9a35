// Ring collective-matmul schedules on the cpu backend, whose reduce_scatter rings read
// each step's block of the activation in place (runtime/in_place.h: SliceReadInPlace),
// and the zigzag ring attention, whose attentions read the halves of each k/v block in
// place, checked against the single-device program on 2, 4 and 8 devices.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "runtime/in_place.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"
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

// The cpu backend, counting the slices it runs (each allocates its block) and their bytes.
class SliceCounter : public CpuBackend {
 public:
  explicit SliceCounter(bool views = true) : views_(views) {}
  bool ReadsSlicesInPlace() const override { return views_; }
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, const runtime::OpContext& context,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices) override {
    if (op.Is(OpKind::kSlice) || op.Is(OpKind::kDynamicSlice)) {
      ++slices;
      bytes += op.result(0)->type().num_elements() *
               ElementTypeByteWidth(op.result(0)->type().element_type());
    }
    return CpuBackend::RunOp(op, context, tensors, indices);
  }
  int64_t slices = 0;
  int64_t bytes = 0;

 private:
  bool views_;
};

// Causal attention on a sequence the data loader provides in zigzag order; the zigzag
// ring splits each received k/v block into its two chunks (static slices read by the
// step's attentions), which the cpu backend reads in place.
constexpr char kAttention[] = R"(mesh @m(sp=$N)

func @attn(%q: f32[2, 2, 64@sp zigzag, 8], %k: f32[2, 2, 64@sp zigzag, 8], %v: f32[2, 2, 64@sp zigzag, 8]) -> f32[2, 2, 64@sp zigzag, 8] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)";

TEST(RingViewsTest, ZigzagRingReadingKvHalvesInPlaceMatchesOneDevice) {
  for (int devices : {2, 4, 8}) {
    const std::string source = absl::StrReplaceAll(kAttention, {{"$N", absl::StrCat(devices)}});
    testing::SpmdCheckOptions options;
    options.seed = 5;
    options.pipeline = "ring-attention{zigzag=true},cse";
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(source, "attn", options);
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << devices << " devices\n" << check->report << check->lowered;
    // The k/v halves (and q's) are read in place by the step's attentions.
    int views = 0;
    WalkOps(check->module->functions()[0]->body(), [&](Operation* op) {
      if (runtime::SliceReadInPlace(*op) && op->result(0)->users()[0]->Is(OpKind::kAttention)) {
        ++views;
      }
    });
    // q's two halves, and k's and v's two halves at the first and the last step (and in
    // the loop of the steps between, where there are any).
    EXPECT_EQ(views, devices == 2 ? 2 + 2 * 4 : 2 + 3 * 4) << check->lowered;

    // The tensors the slices allocate when run, with views and with every slice run as
    // an op: with views none (every slice's readers are attentions).
    const Function& function = *check->module->functions()[0];
    std::vector<std::vector<runtime::Tensor>> inputs(devices);
    for (int d = 0; d < devices; ++d) {
      for (Value* arg : function.body()->arguments()) {
        inputs[d].push_back(runtime::Tensor(arg->type().element_type(), arg->type().dims()));
      }
    }
    SliceCounter in_place;
    SliceCounter slicing(false);
    ASSERT_TRUE(runtime::Interpreter(function, in_place).Run(inputs).ok());
    ASSERT_TRUE(runtime::Interpreter(function, slicing).Run(inputs).ok());
    // Every device slices q once and k and v at each of its `devices` steps.
    EXPECT_EQ(slicing.slices, devices * (2 + 4 * devices));
    EXPECT_EQ(in_place.slices, 0);
    std::printf("zigzag ring on %d devices: %lld slice tensors (%lld bytes) copied, %lld with views\n",
                devices, static_cast<long long>(slicing.slices),
                static_cast<long long>(slicing.bytes), static_cast<long long>(in_place.slices));
  }
}

}  // namespace
}  // namespace commir::cpu
