// Expert parallelism: a top-2 MoE layer whose tokens are split in routing groups over
// `ep` (and `dp`) and whose experts are split over `ep`, through propagate-sharding and
// lower-to-spmd on the cpu mesh, forward and gradient, against the one-device program.
// The one-device program routes the same groups (moe_dispatch's `groups`), so the same
// choices are dropped on one device and on the mesh. Megatron's alltoall dispatcher
// exchanges each layer's tokens twice in the forward (dispatch, combine) and twice in the
// backward; the test counts exactly those all_to_alls and no other collective over ep.
#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

struct EpCase {
  const char* mesh;    // the mesh's axes
  const char* tokens;  // the axes of x's token dimension
  int groups;          // routing groups: the number of token shards
  const char* ffn;     // the expert FFN width's layout ("" or "@tp")
  const char* buffer;  // the dispatched buffer's layout, when written
};

// ep = 2, 4, 8; ep x tp = 2 x 2 (each expert's FFN width split over tp inside);
// dp x ep = 2 x 4 (expert-data parallelism: tokens over both, experts over ep, each
// expert's weights replicated over dp). There the buffer's layout is written, [E@ep,
// G C@dp, H]: propagation does not find on its own that the expert matmuls may keep the
// columns split over dp once ep has moved to the experts (it would gather them over dp).
//
// The backward exchanges the buffer with two all_to_alls on every mesh, as Megatron-LM's
// dispatcher does (before propagation charged compute, it gathered the cotangent rows at
// ep = 2 and dispatched every token on every device).
constexpr EpCase kCases[] = {
    {"ep=2", "ep", 2, "", ""},
    {"ep=4", "ep", 4, "", ""},
    {"ep=8", "ep", 8, "", ""},
    {"ep=2, tp=2", "ep", 2, "@tp", ""},
    {"dp=2, ep=4", "(dp, ep)", 8, "", " : f32[8@ep, 8@dp, 8]"},
};

// 32 tokens of hidden 8, top-2 over 8 experts of FFN width 12, capacity factor 0.75: a
// group of 32 / G tokens has C = ceil(32 / G * 2 * 0.75 / 8) slots per expert, fewer
// than its 64 / G choices, so every case drops choices.
std::string Layer(const EpCase& c) {
  return absl::Substitute(R"(mesh @m($0)

func @f(%x: f32[32@$1, 8], %wr: f32[8, 8], %w1: f32[8@ep, 8, 12$3], %w2: f32[8@ep, 12$3, 8]) -> f32[32@$1, 8] {
  %logits = matmul(%x, %wr)
  %probs = softmax(%logits) {dim = 1}
  %top, %experts = top_k(%probs) {k = 2}
  %buf = moe_dispatch(%x, %experts) {experts = 8, capacity_factor = 0.75, groups = $2}$4
  %a = matmul(%buf, %w1)
  %act = silu(%a)
  %out = matmul(%act, %w2)
  %back = moe_collect(%out, %experts) {groups = $2}
  %g3 = reshape(%top) : f32[32, 2, 1]
  %weighted = mul(%back, %g3)
  %moe = reduce_sum(%weighted) {dims = [1]}
  %y = add(%x, %moe)
  return %y
}
)",
                          c.mesh, c.tokens, c.groups, c.ffn, c.buffer);
}

// The number of ops of `function` of `kind`, and of those that run over `axes` alone
// ("ep") when given.
int CountOf(const Function& function, OpKind kind, const char* axes = nullptr) {
  int n = 0;
  for (const Operation* op : *function.body()) {
    if (!op->Is(kind)) continue;
    const Attribute* axis = op->attrs().Find("axis");
    if (axes == nullptr || (axis != nullptr && absl::StrJoin(axis->axes(), ",") == axes)) ++n;
  }
  return n;
}

TEST(MoeExpertParallel, ForwardMatchesOneDeviceWithTwoAllToAllsOverEp) {
  for (const EpCase& c : kCases) {
    SCOPED_TRACE(c.mesh);
    for (uint64_t seed : {0, 1}) {
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(Layer(c), "f", seed);
      ASSERT_TRUE(check.ok()) << check.status();
      EXPECT_TRUE(check->pass) << check->report << check->lowered;
      const Function& f = *check->module->FindFunction("f");
      EXPECT_EQ(CountOf(f, OpKind::kAllToAll), 2) << check->lowered;
      EXPECT_EQ(CountOf(f, OpKind::kAllToAll, "ep"), 2) << check->lowered;
      EXPECT_EQ(CountOf(f, OpKind::kAllGather), 0) << check->lowered;
      // Each device routes its one group with Megatron-LM's per-device capacity,
      // ceil(T_local k f / E) = ceil(32 / G * 2 * 0.75 / 8).
      const int capacity = static_cast<int>(std::ceil(32.0 / c.groups * 2 * 0.75 / 8));
      EXPECT_THAT(check->lowered, ::testing::HasSubstr(absl::StrCat(
                                      "{experts = 8, capacity = ", capacity, ", groups = 1}")))
          << check->lowered;
    }
  }
}

TEST(MoeExpertParallel, GradientMatchesOneDeviceWithFourAllToAllsOverEp) {
  for (const EpCase& c : kCases) {
    SCOPED_TRACE(c.mesh);
    std::unique_ptr<Module> module = testing::ParseForTest(Layer(c));
    ASSERT_NE(module, nullptr);
    // The output's cotangent is an argument laid out as the output (seed=cotangents).
    AutodiffOptions options;
    options.seed_cotangents = true;
    absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("f"), options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::string name = (*grad)->name();
    absl::StatusOr<testing::SpmdCheck> check =
        testing::CheckSpmd(*module, name, {.seed = 3});
    ASSERT_TRUE(check.ok()) << check.status();
    const std::string lowered = PrintModule(*check->module);
    EXPECT_TRUE(check->pass) << check->report << lowered;
    const Function& g = *check->module->FindFunction(name);
    // The forward's dispatch and combine, and the backward's two (the combine's
    // derivative is a dispatch, the dispatch's a combine).
    EXPECT_EQ(CountOf(g, OpKind::kAllToAll), 4) << lowered;
    EXPECT_EQ(CountOf(g, OpKind::kAllToAll, "ep"), 4) << lowered;
    EXPECT_EQ(CountOf(g, OpKind::kAllGather), 0) << lowered;
  }
}

}  // namespace
}  // namespace commir::sharding
