// autodiff{remat=...}: a gradient that recomputes its blocks equals the one that keeps
// every activation, on one device and partitioned, survives the cleanups after
// partitioning, and needs less memory in schedule-report by about a block's activations.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "runtime/memory_estimate.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

// Two pre-norm MLP blocks (Megatron layouts: tensor-parallel hidden, data-parallel
// tokens) with the mean square of the output as the loss. T tokens, hidden 32, MLP 4x.
std::string TwoBlockMlp(const std::string& mesh, const std::string& dp, const std::string& tp,
                        int tokens) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @model(%x: f32[TDP, 32], %g1: f32[32], %w1: f32[32, 128TP], %w2: f32[128TP, 32],
            %g2: f32[32], %w3: f32[32, 128TP], %w4: f32[128TP, 32]) -> f32[] {
  %n1 = rmsnorm(%x, %g1)
  %u1 = matmul(%n1, %w1)
  %a1 = silu(%u1)
  %d1 = matmul(%a1, %w2)
  %r1 = add(%x, %d1)
  %n2 = rmsnorm(%r1, %g2)
  %u2 = matmul(%n2, %w3)
  %a2 = silu(%u2)
  %d2 = matmul(%a2, %w4)
  %y = add(%r1, %d2)
  %sq = mul(%y, %y)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", mesh}, {"DP", dp}, {"TP", tp},
                              {"T", absl::StrCat(tokens)}});
}

// One pre-norm transformer layer (causal attention over 4 heads, then a GELU MLP), so
// two residual blocks, the attention and the MLP. The heads and MLP columns are split
// over tp.
std::string TransformerLayer(const std::string& mesh, const std::string& tp) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)
func @layer(%x: f32[16TP, 16], %g1: f32[16], %b1: f32[16], %wq: f32[16, 16TP],
            %wk: f32[16, 16TP], %wv: f32[16, 16TP], %wo: f32[16TP, 16], %g2: f32[16],
            %b2: f32[16], %w1: f32[16, 64TP], %w2: f32[64TP, 16]) -> f32[] {
  %h = layernorm(%x, %g1, %b1) {eps = 1e-5}
  %q = matmul(%h, %wq) : f32[16, 16TP]
  %k = matmul(%h, %wk) : f32[16, 16TP]
  %v = matmul(%h, %wv) : f32[16, 16TP]
  %q4 = reshape(%q) : f32[1, 16, 4TP, 4]
  %k4 = reshape(%k) : f32[1, 16, 4TP, 4]
  %v4 = reshape(%v) : f32[1, 16, 4TP, 4]
  %qh = transpose(%q4) {perm = [0, 2, 1, 3]} : f32[1, 4TP, 16, 4]
  %kh = transpose(%k4) {perm = [0, 2, 1, 3]} : f32[1, 4TP, 16, 4]
  %vh = transpose(%v4) {perm = [0, 2, 1, 3]} : f32[1, 4TP, 16, 4]
  %o = attention(%qh, %kh, %vh) {causal}
  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f32[1, 16, 4TP, 4]
  %o2 = reshape(%ot) : f32[16, 16TP]
  %attn = matmul(%o2, %wo) : f32[16TP, 16]
  %r = add(%x, %attn)
  %h2 = layernorm(%r, %g2, %b2) {eps = 1e-5}
  %u = matmul(%h2, %w1) : f32[16, 64TP]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[16TP, 16]
  %y = add(%r, %d)
  %sq = mul(%y, %y)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"MESH", mesh}, {"TP", tp}});
}

AutodiffOptions Blocks() {
  AutodiffOptions options;
  options.remat = RematPolicy::kBlocks;
  return options;
}

// `text` with @<function>_grad added under `options`.
std::unique_ptr<Module> WithGradient(const std::string& text, const std::string& function,
                                     const AutodiffOptions& options) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return nullptr;
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction(function), options);
  EXPECT_TRUE(grad.ok()) << grad.status();
  return grad.ok() ? std::move(module) : nullptr;
}

// The remat block indices of the function's ops (one per recomputed op).
std::vector<int64_t> RematMarks(const Function& function) {
  std::vector<int64_t> marks;
  for (const Operation* op : *function.body()) {
    if (const Attribute* a = op->attrs().Find(kRematAttr)) marks.push_back(a->int_value());
  }
  return marks;
}

// Runs both gradient functions on one device with the same inputs and expects the same
// results (the recomputation runs the same ops on the same values).
void ExpectSameGradients(const Function& kept, const Function& recomputed) {
  const std::vector<runtime::Tensor> inputs = testing::RandomGlobalInputs(kept, 17);
  absl::StatusOr<std::vector<runtime::Tensor>> want = testing::RunWithGlobalInputs(kept, inputs);
  absl::StatusOr<std::vector<runtime::Tensor>> got =
      testing::RunWithGlobalInputs(recomputed, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t r = 0; r < got->size(); ++r) {
    std::vector<double> g = (*got)[r].ToDouble();
    std::vector<double> w = (*want)[r].ToDouble();
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], w[i], 1e-5 * (1 + std::abs(w[i]))) << "result " << r << " element " << i;
    }
  }
}

TEST(RematTest, BlocksRecomputeEachResidualBlockAndKeepTheGradient) {
  const std::string text = TwoBlockMlp("tp=2", "", "@tp", 16);
  std::unique_ptr<Module> kept = WithGradient(text, "model", AutodiffOptions{});
  std::unique_ptr<Module> remat = WithGradient(text, "model", Blocks());
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(remat, nullptr);
  EXPECT_TRUE(RematMarks(*kept->FindFunction("model_grad")).empty());
  // Each block recomputes its norm, first matmul and activation (the second matmul's
  // result is not read by any rule, so it is not kept), block 1's backward first.
  EXPECT_EQ(RematMarks(*remat->FindFunction("model_grad")),
            (std::vector<int64_t>{1, 1, 1, 0, 0, 0}))
      << PrintModule(*remat);
  ExpectSameGradients(*kept->FindFunction("model_grad"), *remat->FindFunction("model_grad"));
}

TEST(RematTest, AttentionAndMlpBlocksOfATransformerLayer) {
  const std::string text = TransformerLayer("tp=2", "@tp");
  std::unique_ptr<Module> kept = WithGradient(text, "layer", AutodiffOptions{});
  std::unique_ptr<Module> remat = WithGradient(text, "layer", Blocks());
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(remat, nullptr);
  std::vector<int64_t> marks = RematMarks(*remat->FindFunction("layer_grad"));
  EXPECT_NE(std::find(marks.begin(), marks.end(), 0), marks.end()) << "attention block";
  EXPECT_NE(std::find(marks.begin(), marks.end(), 1), marks.end()) << "MLP block";
  auto attentions = [](const Function& f) {
    int n = 0;
    for (const Operation* op : *f.body()) n += op->Is(OpKind::kAttention) ? 1 : 0;
    return n;
  };
  // The attention block recomputes its attention (whose output the out-projection's
  // rule reads); attention_grad's own recomputation of o and lse is there either way.
  EXPECT_EQ(attentions(*remat->FindFunction("layer_grad")),
            attentions(*kept->FindFunction("layer_grad")) + 1);
  ExpectSameGradients(*kept->FindFunction("layer_grad"), *remat->FindFunction("layer_grad"));
}

TEST(RematTest, RematAtCheckpointsAtTheNamedValues) {
  const std::string text = TwoBlockMlp("tp=2", "", "@tp", 16);
  AutodiffOptions options;
  options.remat_at = {"r1"};
  std::unique_ptr<Module> kept = WithGradient(text, "model", AutodiffOptions{});
  std::unique_ptr<Module> remat = WithGradient(text, "model", options);
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(remat, nullptr);
  // One block, from the arguments to %r1: the second block is kept.
  EXPECT_EQ(RematMarks(*remat->FindFunction("model_grad")), (std::vector<int64_t>{0, 0, 0}));
  ExpectSameGradients(*kept->FindFunction("model_grad"), *remat->FindFunction("model_grad"));
}

TEST(RematTest, AFunctionWithoutResidualBlocksIsDifferentiatedAsWithout) {
  const std::string text = R"(func @f(%x: f32[4, 8], %g: f32[8], %w: f32[8, 8]) -> f32[] {
  %n = rmsnorm(%x, %g)
  %h = matmul(%n, %w)
  %loss = reduce_sum(%h) {dims = [0, 1]}
  return %loss
}
)";
  std::unique_ptr<Module> kept = WithGradient(text, "f", AutodiffOptions{});
  std::unique_ptr<Module> remat = WithGradient(text, "f", Blocks());
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(remat, nullptr);
  EXPECT_EQ(PrintModule(*remat), PrintModule(*kept));
}

TEST(RematTest, BadCheckpointsAreLocatedErrors) {
  const std::string text = TwoBlockMlp("tp=2", "", "@tp", 16);
  auto refusal = [&](const AutodiffOptions& options) {
    std::unique_ptr<Module> module = testing::ParseForTest(text);
    DiagnosticEngine diagnostics;
    absl::StatusOr<Function*> grad =
        Differentiate(*module, *module->FindFunction("model"), options, &diagnostics);
    EXPECT_FALSE(grad.ok());
    std::vector<Diagnostic> sorted = diagnostics.Sorted();
    if (sorted.empty()) return std::string("no diagnostic");
    return absl::StrCat(sorted[0].loc.line, ":", sorted[0].loc.col, ": ", sorted[0].message);
  };
  AutodiffOptions unknown;
  unknown.remat_at = {"r1", "nope"};
  EXPECT_EQ(refusal(unknown), "2:1: remat-at names %nope, which @model does not define");
  AutodiffOptions both = Blocks();
  both.remat_at = {"r1"};
  EXPECT_EQ(refusal(both), "2:1: give remat=blocks or remat-at, not both");
}

// Partitioned (with the default pipeline's canonicalize and CSE, and a schedule pass on
// top) the recomputing gradient computes the one-device gradient.
struct MeshCase {
  std::string mesh;
  std::string dp;
  std::string tp;
  std::string pipeline;  // applied after the default pipeline
};

class RematOnMeshTest : public ::testing::TestWithParam<MeshCase> {};

void PrintTo(const MeshCase& m, std::ostream* os) { *os << m.mesh << " " << m.pipeline; }

void ExpectPartitionedMatches(const std::string& text, const std::string& function,
                              const std::string& pipeline) {
  std::unique_ptr<Module> module = WithGradient(text, function, Blocks());
  ASSERT_NE(module, nullptr);
  testing::SpmdCheckOptions options;
  options.seed = 5;
  options.pipeline = pipeline;
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckSpmd(PrintModule(*module), function + "_grad", options);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << "\n" << check->lowered;
  EXPECT_FALSE(RematMarks(*check->module->FindFunction(function + "_grad")).empty())
      << "the recomputation did not survive the passes\n" << check->lowered;
}

TEST_P(RematOnMeshTest, TwoBlockMlpGradientMatchesOneDevice) {
  const MeshCase& m = GetParam();
  ExpectPartitionedMatches(TwoBlockMlp(m.mesh, m.dp, m.tp, 16), "model", m.pipeline);
}

TEST_P(RematOnMeshTest, TransformerLayerGradientMatchesOneDevice) {
  const MeshCase& m = GetParam();
  ExpectPartitionedMatches(TransformerLayer(m.mesh, m.tp), "layer", m.pipeline);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, RematOnMeshTest,
    ::testing::Values(MeshCase{"tp=2", "", "@tp", ""}, MeshCase{"dp=2, tp=2", "@dp", "@tp", ""},
                      MeshCase{"tp=4", "", "@tp", "cse,canonicalize,cse"},
                      MeshCase{"tp=2", "", "@tp", "ring-collective-matmul,cse,canonicalize,dce"}),
    [](const ::testing::TestParamInfo<MeshCase>& info) {
      return absl::StrCat("case", info.index);
    });

// schedule-report's peak extra memory drops by about what the forward no longer keeps
// for the backward: the values block 0 recomputes (those the rules read). The other block
// is recomputed while block 0's values are gone, so the difference is near one block's
// worth; the recomputation's GEMMs show in the report's count.
TEST(RematMemoryTest, PeakDropsByAboutOneBlocksActivations) {
  const std::string text = TwoBlockMlp("tp=2", "", "@tp", 64);
  std::unique_ptr<Module> kept = WithGradient(text, "model", AutodiffOptions{});
  std::unique_ptr<Module> remat = WithGradient(text, "model", Blocks());
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(remat, nullptr);
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*kept).ok());
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*remat).ok());
  const Function& kept_grad = *kept->FindFunction("model_grad");
  const Function& remat_grad = *remat->FindFunction("model_grad");
  schedules::ScheduleStats k = schedules::ComputeScheduleStats(kept_grad);
  schedules::ScheduleStats r = schedules::ComputeScheduleStats(remat_grad);

  double block0_bytes = 0;
  for (const Operation* op : *remat_grad.body()) {
    const Attribute* mark = op->attrs().Find(kRematAttr);
    if (mark == nullptr || mark->int_value() != 0) continue;
    for (const Value* v : op->results()) {
      block0_bytes += static_cast<double>(v->type().num_elements()) *
                      ElementTypeByteWidth(v->type().element_type());
    }
  }
  ASSERT_GT(block0_bytes, 0) << PrintFunction(remat_grad);
  const double saved = k.peak_extra_bytes - r.peak_extra_bytes;
  EXPECT_GT(saved, 0.5 * block0_bytes) << k.peak_extra_bytes << " vs " << r.peak_extra_bytes;
  EXPECT_LT(saved, 1.5 * block0_bytes) << k.peak_extra_bytes << " vs " << r.peak_extra_bytes;
  EXPECT_GT(r.gemms, k.gemms) << "the recomputed GEMMs run in the backward";
  // The interpreter frees each value after its last use, so its estimate of a run's
  // memory drops too.
  EXPECT_LT(runtime::PeakLiveBytesPerDevice(remat_grad),
            runtime::PeakLiveBytesPerDevice(kept_grad));
}

}  // namespace
}  // namespace commir
