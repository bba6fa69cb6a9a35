// Vocabulary-parallel cross-entropy (vocab_parallel_loss.h): logits split over the
// vocabulary are never gathered. Each case runs on the cpu mesh against the one-device
// program on 1-, 2-, 4- and 2x4-device meshes (testing::CheckPartitionOnly), forward and,
// through autodiff, backward, with label smoothing, z-loss and ignore_index.
//
// The sizes are large enough that the partitioner's cost model (bytes plus 1 MiB per
// collective, layout.h) prefers three [tokens] all_reduces to an all_gather of the logits,
// as it does at any real vocabulary: 128 tokens x 16384 classes of f32 is 8 MiB.
//
// Labels are made from a float argument, since the check draws random inputs: s = |r| *
// 1.25 V truncated to an integer; where s >= V - 1 the label is ignore_index (-1), so
// every run has ignored tokens and every other label is a class.
#include <cmath>
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
constexpr int kHidden = 256;

struct MeshCase {
  const char* mesh;
  int devices;         // over the vocabulary
  const char* vocab;   // the vocabulary dim's axes
  const char* tokens;  // the token dim's axes of per-token losses ("" : whole)
  int none_devices;    // over the vocabulary of per-token losses
  const char* none_vocab;
};

// On 2x4 devices the per-token losses split their tokens over dp and the vocabulary over
// tp; the reduced losses split the vocabulary over both.
const MeshCase kMeshes[] = {
    {"tp=1", 1, "tp", "", 1, "tp"},
    {"tp=2", 2, "tp", "", 2, "tp"},
    {"tp=4", 4, "tp", "", 4, "tp"},
    {"dp=2, tp=4", 8, "(dp, tp)", "dp", 4, "tp"},
};

// A type of `dims` sizes with `axes` on each ("" : whole).
std::string Dims(int a, const std::string& a_axes, int b, const std::string& b_axes) {
  return absl::StrCat(a, a_axes.empty() ? "" : "@", a_axes, ", ", b, b_axes.empty() ? "" : "@",
                      b_axes);
}

double AllReduceBytes(const Function& f) {
  for (const CollectiveTotals& c : ComputeCommReport(f).collectives) {
    if (c.kind == OpKind::kAllReduce) return c.bytes_per_device;
  }
  return 0;
}

// The three reductions over logits split along the vocabulary: per-token losses (with
// the tokens split too on the 2x4 mesh), a mean and a sum. Each is three all_reduces of
// per-token statistics (the mean's and the sum's shares are scalars), never a gather;
// the mean and the sum of the same logits share their max and sum of exponentials (cse).
// On one device the split is a formality, and an all_gather of one block moves nothing.
TEST(VocabParallelCrossEntropy, ForwardOnSeveralMeshes) {
  for (const MeshCase& m : kMeshes) {
    SCOPED_TRACE(m.mesh);
    const std::string none_logits = Dims(kTokens, m.tokens, kClasses, m.none_vocab);
    const std::string logits = Dims(kTokens, "", kClasses, m.vocab);
    const std::string tok = m.tokens[0] ? absl::StrCat(kTokens, "@", m.tokens) : absl::StrCat(kTokens);
    const std::string text = absl::StrCat(
        "mesh @m(", m.mesh, ")\n\nfunc @f(%x: f32[", none_logits, "], %y: f32[", logits, "], %r: f32[",
        tok, "]) -> (f32[", tok, "], f32[], f32[]) on @m {\n", Labels(tok),
        "  %tok, %lse = cross_entropy(%x, %labels) {reduction = none, ignore_index = -1, "
        "label_smoothing = 0.1, z_loss = 0.01}\n",
        "  %mean, %lse2 = cross_entropy(%y, %labels) {ignore_index = -1, label_smoothing = 0.2}\n",
        "  %sum, %lse3 = cross_entropy(%y, %labels) {reduction = sum, ignore_index = -1, "
        "z_loss = 0.001}\n",
        "  return %tok, %mean, %sum\n}\n");
    testing::SpmdCheck check = Check(text, "f", /*seed=*/3);
    ASSERT_NE(check.module, nullptr);
    if (m.devices == 1) continue;
    // The logits are never gathered; on 2x4 devices the reduced losses need every
    // token's label, so the dp-split labels are (an all_gather of 128 i64).
    EXPECT_THAT(check.lowered, Not(HasSubstr("all_gather(%x"))) << check.lowered;
    EXPECT_THAT(check.lowered, Not(HasSubstr("all_gather(%y"))) << check.lowered;
    EXPECT_EQ(Count(check.lowered, "all_gather"), m.tokens[0] ? 1 : 0) << check.lowered;
    EXPECT_EQ(Count(check.lowered, "cross_entropy"), 3) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("%class_offset")) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr(absl::StrCat("classes = ", kClasses))) << check.lowered;
    // max, sum of exponentials, and the shares of the loss: three for the per-token
    // losses, two shared by the mean and the sum, and one share each.
    EXPECT_EQ(Count(check.lowered, "all_reduce"), 7) << check.lowered;
    EXPECT_EQ(Count(check.lowered, "reduce_scatter") + Count(check.lowered, "all_to_all"), 0)
        << check.lowered;
    // Bytes per device (ring all_reduce: 2 (n-1)/n of its operand): the per-token losses'
    // statistics are [tokens / dp] f32, the others' [tokens] f32 and two scalar shares.
    const double none_ring = 2.0 * (m.none_devices - 1) / m.none_devices;
    const double ring = 2.0 * (m.devices - 1) / m.devices;
    const double none_tokens = m.tokens[0] ? kTokens / 2.0 : kTokens;
    const double expected = none_ring * 4 * 3 * none_tokens + ring * 4 * (2 * kTokens + 2);
    const Function* f = check.module->FindFunction("f");
    ASSERT_NE(f, nullptr);
    EXPECT_DOUBLE_EQ(AllReduceBytes(*f), expected);
  }
}

// bf16 logits: the statistics and the shares of the loss are f32 (a bf16 share would lose
// the loss's leading bits to lse - x_t), and the sum is rounded to bf16 once, as the
// one-device kernel rounds its f32 loss. (Twice the tokens, so that the bf16 logits weigh
// as much as the f32 ones above.)
// Rows with no finite maximum: all logits -inf (log of zeros), and all +inf. x - max
// would be inf - inf = NaN; one device gives lse -inf and +inf (backend_cpu's
// cross_entropy), and so must the vocabulary-parallel lse, which shifts such rows by 0.
TEST(VocabParallelCrossEntropy, RowsWithoutAFiniteMaximumGetInfiniteLse) {
  const std::string text = absl::StrCat(
      "mesh @m(tp=4)\n\nfunc @f(%x: f32[", kTokens, ", ", kClasses, "@tp], %r: f32[", kTokens,
      "]) -> (f32[", kTokens, "], f32[", kTokens, "]) on @m {\n", Labels(absl::StrCat(kTokens)),
      "  %zero = mul(%x, 0.0)\n"
      "  %low = log(%zero)\n"
      "  %high = neg(%low)\n"
      "  %l1, %lse_low = cross_entropy(%low, %labels) {reduction = none, ignore_index = -1}\n"
      "  %l2, %lse_high = cross_entropy(%high, %labels) {reduction = none, ignore_index = -1}\n"
      "  return %lse_low, %lse_high\n}\n");
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  ASSERT_NE(module, nullptr);
  std::unique_ptr<Module> lowered = module->Clone();
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok());
  const std::string printed = PrintModule(*lowered);
  EXPECT_THAT(printed, Not(HasSubstr("all_gather(%low"))) << printed;
  const std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(*module->FindFunction("f"), 5);
  absl::StatusOr<std::vector<runtime::Tensor>> one =
      testing::RunWithGlobalInputs(*module->FindFunction("f"), inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> mesh =
      testing::RunWithGlobalInputs(*lowered->FindFunction("f"), inputs);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  for (int r = 0; r < 2; ++r) {
    const double sign = r == 0 ? -1 : 1;
    for (const std::vector<runtime::Tensor>* run : {&*one, &*mesh}) {
      for (double lse : (*run)[r].ToDouble()) {
        ASSERT_TRUE(std::isinf(lse) && lse * sign > 0) << "result " << r << ": " << lse;
      }
    }
  }
}

TEST(VocabParallelCrossEntropy, Bf16LogitsSumTheirSharesInF32) {
  constexpr int kBf16Tokens = 2 * kTokens;
  for (const MeshCase& m : kMeshes) {
    if (m.devices == 1) continue;
    SCOPED_TRACE(m.mesh);
    const std::string logits = Dims(kBf16Tokens, "", kClasses, m.vocab);
    const std::string text = absl::StrCat(
        "mesh @m(", m.mesh, ")\n\nfunc @f(%x: bf16[", logits, "], %r: f32[", kBf16Tokens,
        "]) -> (bf16[", kBf16Tokens, "], bf16[]) on @m {\n", Labels(absl::StrCat(kBf16Tokens)),
        "  %tok, %lse = cross_entropy(%x, %labels) {reduction = none, ignore_index = -1, "
        "label_smoothing = 0.1}\n",
        "  %mean, %lse2 = cross_entropy(%x, %labels) {ignore_index = -1, z_loss = 0.001}\n",
        "  return %tok, %mean\n}\n");
    testing::SpmdCheck check = Check(text, "f", /*seed=*/3);
    ASSERT_NE(check.module, nullptr);
    EXPECT_THAT(check.lowered, Not(HasSubstr("all_gather"))) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("all_reduce(%loss_share) {axis = " + std::string(m.vocab) +
                                         "} : f32[256]"))
        << check.lowered;
  }
}

// A GPT head and its loss: logits = h W^T with the output embedding W split over the
// vocabulary. Propagation keeps the logits split from the matmul into the loss; the
// forward communicates the loss's three all_reduces and nothing else.
TEST(VocabParallelCrossEntropy, GptHeadCommunicatesOnlyThreeAllReduces) {
  const std::string text = absl::StrCat(
      "mesh @m(tp=8)\n\nfunc @head(%h: f32[", kTokens, ", ", kHidden, "], %w: f32[", kClasses,
      "@tp, ", kHidden, "], %r: f32[", kTokens, "]) -> (f32[", kTokens, "]) on @m {\n",
      Labels(absl::StrCat(kTokens)), "  %logits = matmul(%h, %w) {transpose_b = true}\n",
      "  %loss, %lse = cross_entropy(%logits, %labels) {reduction = none, ignore_index = -1}\n",
      "  return %loss\n}\n");
  testing::SpmdCheck check = Check(text, "head", /*seed=*/3);
  ASSERT_NE(check.module, nullptr);
  const Function* f = check.module->FindFunction("head");
  ASSERT_NE(f, nullptr);
  FunctionCommReport report = ComputeCommReport(*f);
  ASSERT_EQ(report.collectives.size(), 1u) << check.lowered;
  EXPECT_EQ(report.collectives[0].kind, OpKind::kAllReduce);
  EXPECT_EQ(report.collectives[0].count, 3);
  // Three [tokens] f32 all_reduces over 8 devices: 2 * 7/8 * 128 * 4 bytes each.
  EXPECT_DOUBLE_EQ(report.collectives[0].bytes_per_device, 3 * 2 * 7.0 / 8 * kTokens * 4);
  EXPECT_THAT(check.lowered, HasSubstr("all_reduce(%local_max)")) << check.lowered;
}

// The head's gradient through autodiff: the backward of the loss is each device's
// columns of dlogits (cross_entropy_grad with the class offset), with no communication of
// its own; the only collectives of the whole step are the forward's three and the
// all_reduce of dh (the partial sum over the vocabulary of dlogits W), Megatron-LM's.
TEST(VocabParallelCrossEntropy, HeadGradientOnSeveralMeshes) {
  for (const MeshCase& m : kMeshes) {
    SCOPED_TRACE(m.mesh);
    const std::string text = absl::StrCat(
        "mesh @m(", m.mesh, ")\n\nfunc @head(%h: f32[", kTokens, ", ", kHidden, "], %w: f32[",
        kClasses, "@", m.vocab, ", ", kHidden, "], %r: f32[", kTokens, "]) -> (f32[]) on @m {\n",
        Labels(absl::StrCat(kTokens)), "  %logits = matmul(%h, %w) {transpose_b = true}\n",
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
    testing::SpmdCheck check = Check(PrintModule(*module), name, /*seed=*/3);
    ASSERT_NE(check.module, nullptr);
    EXPECT_EQ(Count(check.lowered, "cross_entropy_grad"), 1) << check.lowered;
    if (m.devices == 1) continue;
    EXPECT_THAT(check.lowered, Not(HasSubstr("all_gather"))) << check.lowered;
    EXPECT_THAT(check.lowered, HasSubstr("%class_offset) {")) << check.lowered;
    const Function* f = check.module->FindFunction(name);
    ASSERT_NE(f, nullptr);
    FunctionCommReport report = ComputeCommReport(*f);
    ASSERT_EQ(report.collectives.size(), 1u) << check.lowered;
    EXPECT_EQ(report.collectives[0].count, 4) << check.lowered;
  }
}

}  // namespace
}  // namespace commir::sharding
