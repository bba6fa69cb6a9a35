// A reduced cross-entropy over split tokens (token_parallel_loss.h): logits split over
// the batch (dp) and, on 2x4 devices, over the vocabulary (tp) too are never gathered.
// Each case runs on the cpu mesh against the one-device program (testing::CheckPartitionOnly)
// on 1-, 2-, 4- and 2x4-device meshes, forward and, through autodiff, backward, with
// label smoothing, z-loss and ignore_index.
//
// Labels are made from a float argument (the check draws random inputs): s = |r| * 1.25 V
// truncated; where s >= V - 1 the label is ignore_index (-1), about one token in five, at
// random, so the shards hold different numbers of ignored tokens and a mean of per-shard
// means (or a division by the local count) differs from the one-device mean
// (loss_test_util.h makes them).
//
// The sizes are large enough that the cost model (bytes plus 1 MiB per collective,
// layout.h) prefers the statistics' all_reduces to gathering the logits, as it does at a
// real vocabulary.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/loss_test_util.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using loss_test::Check;
using loss_test::Count;
using loss_test::kClasses;
using loss_test::Labels;

constexpr int kTokens = 128;
constexpr int kHidden = 64;

struct MeshCase {
  const char* mesh;
  const char* tokens;   // the token dim's axes
  const char* classes;  // the class dim's axes ("" : whole)
  int token_devices;
};

const MeshCase kMeshes[] = {
    {"dp=1", "dp", "", 1},
    {"dp=2", "dp", "", 2},
    {"dp=4", "dp", "", 4},
    {"dp=2, tp=4", "dp", "tp", 2},
};

std::string Split(int size, const std::string& axes) {
  return axes.empty() ? absl::StrCat(size) : absl::StrCat(size, "@", axes);
}

// A mean and a sum over logits split over the tokens (and the classes on 2x4): the mean
// is one all_reduce of [sum, count] over dp, the sum one all_reduce of a scalar; the
// logits and the labels stay where they are.
TEST(TokenParallelCrossEntropy, ForwardOnSeveralMeshes) {
  for (const MeshCase& m : kMeshes) {
    SCOPED_TRACE(m.mesh);
    const std::string logits =
        absl::StrCat(Split(kTokens, m.tokens), ", ", Split(kClasses, m.classes));
    const std::string text = absl::StrCat(
        "mesh @m(", m.mesh, ")\n\nfunc @f(%x: f32[", logits, "], %r: f32[", Split(kTokens, m.tokens),
        "]) -> (f32[], f32[]) on @m {\n", Labels(Split(kTokens, m.tokens)),
        "  %mean, %lse = cross_entropy(%x, %labels) {ignore_index = -1, label_smoothing = 0.1, "
        "z_loss = 0.01}\n",
        "  %sum, %lse2 = cross_entropy(%x, %labels) {reduction = sum, ignore_index = -1, "
        "label_smoothing = 0.2}\n",
        "  return %mean, %sum\n}\n");
    testing::SpmdCheck check = Check(text, "f", /*seed=*/5);
    ASSERT_NE(check.module, nullptr);
    if (m.token_devices == 1) continue;
    EXPECT_EQ(Count(check.lowered, "all_gather"), 0) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("%loss_sum_count = all_reduce(")) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("%local_count")) << check.lowered;
    // Mean: [sum, count]; sum: its scalar; with the classes split, the max and the sum of
    // exponentials (shared by both losses) and the mean's share over tp.
    EXPECT_EQ(Count(check.lowered, "all_reduce"), m.classes[0] ? 5 : 2) << check.lowered;
  }
}

// The backward of the mean through a head (logits = h W^T, W split over the vocabulary on
// 2x4): each device's rows of dlogits scaled by dloss over the global count; the weights
// and the logits are never gathered.
TEST(TokenParallelCrossEntropy, HeadGradientOnSeveralMeshes) {
  for (const MeshCase& m : kMeshes) {
    SCOPED_TRACE(m.mesh);
    const std::string text = absl::StrCat(
        "mesh @m(", m.mesh, ")\n\nfunc @head(%h: f32[", Split(kTokens, m.tokens), ", ", kHidden,
        "], %w: f32[", Split(kClasses, m.classes), ", ", kHidden, "], %r: f32[",
        Split(kTokens, m.tokens), "]) -> (f32[]) on @m {\n", Labels(Split(kTokens, m.tokens)),
        "  %logits = matmul(%h, %w) {transpose_b = true}\n",
        "  %loss, %lse = cross_entropy(%logits, %labels) {ignore_index = -1, label_smoothing = 0.1, "
        "z_loss = 0.001}\n",
        "  return %loss\n}\n");
    std::unique_ptr<Module> module = commir::testing::ParseForTest(text);
    ASSERT_NE(module, nullptr);
    AutodiffOptions options;
    options.wrt = {"h", "w"};
    absl::StatusOr<Function*> grad = Differentiate(*module, *module->functions().front(), options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::string name = (*grad)->name();
    testing::SpmdCheck check = Check(PrintModule(*module), name, /*seed=*/5);
    ASSERT_NE(check.module, nullptr);
    if (m.token_devices == 1) continue;
    EXPECT_EQ(Count(check.lowered, "all_gather"), 0) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("%global_count = all_reduce(")) << check.lowered;
  }
}

}  // namespace
}  // namespace commir::sharding
