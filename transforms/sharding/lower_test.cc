#include "transforms/sharding/lower.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "commir/builder.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/sharding/comm_report.h"
#include "testing/spmd_check.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Lowers `text` with the partitioning passes (kPartitionPipeline: the collectives as
// lower-to-spmd emits them), checks it against the one-device reference and returns the
// printed spmd module.
std::string LowerAndCheck(const std::string& text, const std::string& function, uint64_t seed = 0) {
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitionOnly(text, function, seed);
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return "";
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return check->lowered;
}

int Count(const std::string& text, const std::string& op) {
  int n = 0;
  std::string needle = absl::StrCat(" ", op, "(");
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// ---- Whole programs and the collectives they need -------------------------------------

TEST(LowerToSpmd, MlpNeedsOneAllGatherAndOneReduceScatter) {
  std::string out = LowerAndCheck(R"(mesh @m(tp=4)

func @mlp(%x: f32[256@tp, 128], %w1: f32[128, 512@tp], %w2: f32[512@tp, 128]) -> f32[256@tp, 128] {
  %h = matmul(%x, %w1) : f32[256, 512@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[256@tp, 128]
  return %y
}
)",
                                  "mlp");
  EXPECT_EQ(out, R"(mesh @m(tp=4)

spmd func @mlp(%x: f32[256@tp, 128], %w1: f32[128, 512@tp], %w2: f32[512@tp, 128]) -> f32[256@tp, 128] on @m {
  %x_ag = all_gather(%x) {axis = tp, dim = 0} : f32[256, 128]
  %h = matmul(%x_ag, %w1) : f32[256, 128]
  %a = gelu(%h) : f32[256, 128]
  %0 = matmul(%a, %w2) : f32[256, 128]
  %y = reduce_scatter(%0) {axis = tp, dim = 0} : f32[64, 128]
  return %y
}
)");
}

constexpr char kTransformerBlock[] = R"(mesh @m(tp=4)

func @block(%x: f32[256@tp, 256],
            %g1: f32[256], %b1: f32[256],
            %wq: f32[256, 256@tp], %wk: f32[256, 256@tp], %wv: f32[256, 256@tp],
            %wo: f32[256@tp, 256],
            %g2: f32[256], %b2: f32[256],
            %w1: f32[256, 1024@tp], %w2: f32[1024@tp, 256]) -> f32[256@tp, 256] {
  %h = layernorm(%x, %g1, %b1) {eps = 1e-5}
  %q = matmul(%h, %wq) : f32[256, 256@tp]
  %k = matmul(%h, %wk) : f32[256, 256@tp]
  %v = matmul(%h, %wv) : f32[256, 256@tp]
  %q3 = reshape(%q) : f32[256, 8@tp, 32]
  %k3 = reshape(%k) : f32[256, 8@tp, 32]
  %v3 = reshape(%v) : f32[256, 8@tp, 32]
  %qh = transpose(%q3) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %kh = transpose(%k3) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %vh = transpose(%v3) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %q4 = reshape(%qh) : f32[1, 8@tp, 256, 32]
  %k4 = reshape(%kh) : f32[1, 8@tp, 256, 32]
  %v4 = reshape(%vh) : f32[1, 8@tp, 256, 32]
  %o4 = attention(%q4, %k4, %v4) {causal}
  %o3 = reshape(%o4) : f32[8@tp, 256, 32]
  %ot = transpose(%o3) {perm = [1, 0, 2]} : f32[256, 8@tp, 32]
  %o = reshape(%ot) : f32[256, 256@tp]
  %attn = matmul(%o, %wo) : f32[256@tp, 256]
  %r1 = add(%x, %attn)
  %h2 = layernorm(%r1, %g2, %b2) {eps = 1e-5}
  %u = matmul(%h2, %w1) : f32[256, 1024@tp]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[256@tp, 256]
  %y = add(%r1, %d)
  return %y
}
)";

TEST(LowerToSpmd, TransformerBlockSharesOneAllGatherForQKV) {
  std::string out = LowerAndCheck(kTransformerBlock, "block");
  EXPECT_EQ(Count(out, "all_gather"), 2) << out;
  EXPECT_EQ(Count(out, "reduce_scatter"), 2) << out;
  EXPECT_EQ(Count(out, "all_reduce"), 0) << out;
  EXPECT_EQ(Count(out, "all_to_all"), 0) << out;
  // The layernorm runs on the sequence-split rows, then one all_gather feeds q, k and v.
  EXPECT_THAT(out, HasSubstr("  %h = layernorm(%x, %g1, %b1) {eps = 1e-05} : f32[64, 256]\n"
                             "  %h_ag = all_gather(%h) {axis = tp, dim = 0} : f32[256, 256]\n"
                             "  %q = matmul(%h_ag, %wq) : f32[256, 64]\n"
                             "  %k = matmul(%h_ag, %wk) : f32[256, 64]\n"
                             "  %v = matmul(%h_ag, %wv) : f32[256, 64]\n"));
  EXPECT_THAT(out, HasSubstr("  %attn = reduce_scatter("));
  EXPECT_THAT(out, HasSubstr("  %d = reduce_scatter("));
  EXPECT_THAT(out, HasSubstr("  %o4 = attention(%q4, %k4, %v4) {causal} : f32[1, 2, 256, 32]\n"));
}

TEST(LowerToSpmd, DataAndTensorParallelMlpAllReducesOverTpOnly) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=2)

func @mlp(%x: f32[64@dp, 32], %w1: f32[32, 128@tp], %w2: f32[128@tp, 32]) -> f32[64@dp, 32] {
  %h = matmul(%x, %w1) : f32[64@dp, 128@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2)
  return %y
}
)",
                                  "mlp");
  EXPECT_EQ(out, R"(mesh @m(dp=2, tp=2)

spmd func @mlp(%x: f32[64@dp, 32], %w1: f32[32, 128@tp], %w2: f32[128@tp, 32]) -> f32[64@dp, 32] on @m {
  %h = matmul(%x, %w1) : f32[32, 64]
  %a = gelu(%h) : f32[32, 64]
  %y = matmul(%a, %w2) : f32[32, 32]
  %y_ar = all_reduce(%y) {axis = tp} : f32[32, 32]
  return %y_ar
}
)");
}

TEST(LowerToSpmd, SequenceShardedCausalAttentionGathersKeysAndValues) {
  std::string out = LowerAndCheck(R"(mesh @m(sp=4)

func @attention(%q: f32[1, 4, 512@sp, 64], %k: f32[1, 4, 512@sp, 64], %v: f32[1, 4, 512@sp, 64]) -> f32[1, 4, 512@sp, 64] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)",
                                  "attention");
  EXPECT_EQ(out, R"(mesh @m(sp=4)

spmd func @attention(%q: f32[1, 4, 512@sp, 64], %k: f32[1, 4, 512@sp, 64], %v: f32[1, 4, 512@sp, 64]) -> f32[1, 4, 512@sp, 64] on @m {
  %k_ag = all_gather(%k) {axis = sp, dim = 2} : f32[1, 4, 512, 64]
  %v_ag = all_gather(%v) {axis = sp, dim = 2} : f32[1, 4, 512, 64]
  %0 = rank() {axis = sp} : index
  %q_pos = mul(%0, 128) : index
  %o = attention(%q, %k_ag, %v_ag, %q_pos) {causal} : f32[1, 4, 128, 64]
  return %o
}
)");
}

// ---- Op lowerings ---------------------------------------------------------------------

TEST(LowerToSpmd, QueriesKeepTheirPositionsWithAGivenQPosAndMoreKeys) {
  std::string out = LowerAndCheck(R"(mesh @m(sp=2)
func @f(%q: f32[1, 2, 8@sp, 4], %k: f32[1, 2, 16, 4], %v: f32[1, 2, 16, 4]) -> (f32[1, 2, 8@sp, 4], f32[1, 2, 8@sp]) {
  %p = full() {value = 5} : index
  %o, %lse = attention(%q, %k, %v, %p) {causal}
  return %o, %lse
}
)",
                                  "f");
  EXPECT_THAT(out, HasSubstr("%q_pos = add(%p, %1) : index"));
  // Without q_pos the queries are the last Sq positions: Skv - Sq = 8 more.
  out = LowerAndCheck(R"(mesh @m(sp=2)
func @f(%q: f32[1, 2, 8@sp, 4], %k: f32[1, 2, 16, 4], %v: f32[1, 2, 16, 4]) -> f32[1, 2, 8@sp, 4] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)",
                      "f");
  EXPECT_THAT(out, HasSubstr("%q_pos = add(%1, 8) : index"));
}

TEST(LowerToSpmd, GroupedQueryAttentionSplitsHeadsOnA2DMesh) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=2)
func @f(%q: f32[2@dp, 8@tp, 16, 8], %k: f32[2@dp, 2@tp, 32, 8], %v: f32[2@dp, 2@tp, 32, 8]) -> f32[2@dp, 8@tp, 16, 8] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)",
                                  "f");
  EXPECT_EQ(Count(out, "all_gather") + Count(out, "all_to_all"), 0) << out;
}

// Tensor parallelism wider than the key/value heads (4 devices, 2 key/value heads): the
// query heads stay split and each device slices the key/value head its query head uses
// (devices 0, 1 head 0; devices 2, 3 head 1), as Megatron replicates them; no device
// runs another device's heads and nothing is communicated.
TEST(LowerToSpmd, GroupedQueryAttentionWiderThanTheKeyValueHeadsKeepsQueryHeadsSplit) {
  for (const char* causal : {"{causal}", ""}) {
    std::string out = LowerAndCheck(absl::StrCat(R"(mesh @m(tp=4)
func @f(%q: f32[2, 4@tp, 16, 8], %k: f32[2, 2, 16, 8], %v: f32[2, 2, 16, 8]) -> f32[2, 4@tp, 16, 8] {
  %o = attention(%q, %k, %v) )", causal, R"(
  return %o
}
)"),
                                    "f", /*seed=*/11);
    EXPECT_THAT(out, HasSubstr("%kv_head = div(%0, 2) : index"));
    EXPECT_THAT(out, HasSubstr("dynamic_slice(%k, %kv_head) {dim = 1, size = 1} : f32[2, 1, 16, 8]"));
    EXPECT_THAT(out, HasSubstr(": f32[2, 1, 16, 8]\n  return %o"));
    EXPECT_EQ(Count(out, "all_gather") + Count(out, "all_to_all") + Count(out, "all_reduce"), 0) << out;
  }
}

TEST(LowerToSpmd, SoftmaxOverASplitDimCombinesRowStatistics) {
  std::string out = LowerAndCheck(R"(mesh @m(tp=4)
func @f(%x: f32[64, 8192@tp]) -> f32[64, 8192@tp] {
  %y = softmax(%x) {dim = 1}
  return %y
}
)",
                                  "f");
  EXPECT_THAT(out, HasSubstr("reduce_max(%x) {dims = [1], keepdim} : f32[64, 1]"));
  EXPECT_THAT(out, HasSubstr("all_reduce(%0) {axis = tp, reduce = max} : f32[64, 1]"));
  EXPECT_EQ(Count(out, "all_reduce"), 2) << out;
  EXPECT_EQ(Count(out, "all_gather"), 0) << out;
}

TEST(LowerToSpmd, NormsOverASplitDimCombineRowStatistics) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=2)
func @f(%x: bf16[64@dp, 16384@tp], %w: bf16[16384@tp], %b: bf16[16384]) -> (bf16[64@dp, 16384@tp], bf16[64@dp, 16384@tp]) {
  %y = layernorm(%x, %w, %b)
  %z = rmsnorm(%x, %w)
  return %y, %z
}
)",
                                  "f");
  // Statistics in f32, like the kernels; two all_reduces for layernorm, one for rmsnorm.
  EXPECT_THAT(out, HasSubstr("convert(%x) : f32[32, 8192]"));
  EXPECT_EQ(Count(out, "all_reduce"), 3) << out;
  EXPECT_EQ(Count(out, "all_gather"), 0) << out;
  // The replicated bias is sliced locally.
  EXPECT_THAT(out, HasSubstr("%b_sl = dynamic_slice(%b, "));
}

TEST(LowerToSpmd, ReductionsOverSplitDims) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=4)
func @f(%x: f32[8@dp, 64@tp]) -> (f32[8@dp], f32[8@dp] partial(tp), f32[8@dp], f32[8@(dp, tp)]) {
  %s = reduce_sum(%x) {dims = [1]}
  %p = reduce_sum(%x) {dims = [1]}
  %a = reduce_mean(%x) {dims = [1]}
  %m = reduce_max(%x) {dims = [1]} : f32[8@(dp, tp)]
  return %s, %p, %a, %m
}
)",
                                  "f");
  // A sum over a split dim is partial: returned partial as is, or all-reduced.
  EXPECT_THAT(out, HasSubstr("%s = reduce_sum(%x) {dims = [1]} : f32[4]"));
  EXPECT_THAT(out, HasSubstr("all_reduce(%s) {axis = tp} : f32[4]"));
  // A mean is the partial local sum over the global count.
  EXPECT_THAT(out, HasSubstr("div(%s, 64.0) : f32[4]"));
  // A max wanted split is a max reduce_scatter.
  EXPECT_THAT(out, HasSubstr("%m = reduce_scatter(%0) {axis = tp, dim = 0, reduce = max} : f32[1]"));
}

TEST(LowerToSpmd, ReshardsUseTheFewestCollectives) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=4)
func @f(%x: f32[16@tp, 32], %p: f32[16, 32] partial(tp), %r: f32[16, 32], %q: f32[16, 32] partial(tp)) -> (f32[16, 32@tp], f32[16@tp, 32], f32[16, 32], f32[16@(dp, tp), 32], f32[16, 32] partial(dp)) {
  %a = reshard(%x) : f32[16, 32@tp]
  %b = reshard(%p) : f32[16@tp, 32]
  %c = reshard(%q) : f32[16, 32]
  %d = reshard(%r) : f32[16@(dp, tp), 32]
  %e = reshard(%r) : f32[16, 32] partial(dp)
  return %a, %b, %c, %d, %e
}
)",
                                  "f");
  EXPECT_THAT(out, HasSubstr("%a = all_to_all(%x) {axis = tp, split_dim = 1, concat_dim = 0}"));
  EXPECT_THAT(out, HasSubstr("%b = reduce_scatter(%p) {axis = tp, dim = 0}"));
  EXPECT_THAT(out, HasSubstr("%c = all_reduce(%q) {axis = tp}"));
  EXPECT_THAT(out, HasSubstr("%d = dynamic_slice(%r, "));
  EXPECT_THAT(out, HasSubstr("%e = dynamic_slice("));
  EXPECT_EQ(Count(out, "all_gather"), 0) << out;
}

// A value resharded for one user is resharded once: the next user needing the same
// layout reads the same per-device value, and one wanting another layout may start from
// it when that is cheaper (the partial %p, reduce-scattered for %b, is all-gathered for
// %c: half the bytes of an all_reduce).
TEST(LowerToSpmd, LaterUsersReuseAnEarlierReshard) {
  std::string out = LowerAndCheck(R"(mesh @m(tp=4)
func @f(%x: f32[16@tp, 32], %w: f32[32, 8], %p: f32[16, 32] partial(tp)) -> (f32[16, 8], f32[16, 8], f32[16@tp, 32], f32[16, 32]) {
  %a = matmul(%x, %w) : f32[16, 8]
  %b = matmul(%x, %w) : f32[16, 8]
  %c = reshard(%p) : f32[16@tp, 32]
  %d = reshard(%p) : f32[16, 32]
  return %a, %b, %c, %d
}
)",
                                  "f", /*seed=*/5);
  EXPECT_EQ(Count(out, "all_gather"), 2) << out;
  EXPECT_EQ(Count(out, "all_reduce"), 0) << out;
  EXPECT_EQ(Count(out, "reduce_scatter"), 1) << out;
  EXPECT_THAT(out, HasSubstr("%d = all_gather(%c) {axis = tp, dim = 0}"));
}

TEST(LowerToSpmd, ReshapesKeepContiguousSplits) {
  std::string out = LowerAndCheck(R"(mesh @m(dp=2, tp=2)
func @f(%x: f32[4@dp, 8@tp, 6]) -> (f32[4@dp, 48], f32[2@dp, 2, 8@tp, 6]) {
  %a = reshape(%x) : f32[4, 48]
  %b = reshape(%x) : f32[2@dp, 2, 8@tp, 6]
  return %a, %b
}
)",
                                  "f");
  // Merging the split dim into the major part of a dim keeps it split (%a is free, so
  // it stays split); the return gathers it into the declared layout.
  EXPECT_THAT(out, HasSubstr("%a = reshape(%x) : f32[2, 24]\n"));
  EXPECT_THAT(out, HasSubstr("%a_ag = all_gather(%a) {axis = tp, dim = 1} : f32[2, 48]\n"));
  // Splitting the dp-split dim 4 into 2 x 2 keeps dp on the major part.
  EXPECT_THAT(out, HasSubstr("%b = reshape(%x) : f32[1, 2, 4, 6]"));
  // A split that would end up on a minor part is gathered before the reshape.
  out = LowerAndCheck(R"(mesh @m(tp=2)
func @f(%x: f32[4, 8@tp]) -> f32[32] {
  %a = reshape(%x) : f32[32]
  return %a
}
)",
                      "f");
  EXPECT_THAT(out, HasSubstr("%x_ag = all_gather(%x) {axis = tp, dim = 1} : f32[4, 8]\n"
                             "  %a = reshape(%x_ag) : f32[32]\n"));
}

TEST(LowerToSpmd, ElementwiseWithLiteralsAndBroadcasts) {
  LowerAndCheck(R"(mesh @m(tp=2)
func @f(%x: f32[8@tp, 4], %b: f32[4@tp]) -> f32[8@tp, 4] {
  %s = mul(0.5, %x)
  %t = add(%s, %b)
  %u = sub(%t, 1.0)
  return %u
}
)",
                "f");
}

// compare and select on 1-, 2-, 4- and 2x4-device meshes: a masked relu, a select
// between a split and a broadcast value, and a comparison of a matmul's partial result,
// which must be summed before it is compared (a predicate of addends says nothing of the
// sum). Each run is checked against the one-device reference.
TEST(LowerToSpmd, CompareAndSelectOnSeveralMeshes) {
  for (const char* mesh : {"tp=1", "tp=2", "tp=4", "dp=2, tp=4"}) {
    const bool two_d = std::string(mesh).find("dp") != std::string::npos;
    const std::string rows = two_d ? "16@dp" : "16";
    std::string out = LowerAndCheck(absl::StrCat("mesh @m(", mesh, R"()
func @f(%x: f32[)", rows, R"(, 32@tp], %w: f32[32@tp, 8], %b: f32[32@tp], %t: f32[8]) -> (f32[)",
                                                 rows, R"(, 32@tp], f32[)", rows,
                                                 R"(, 32], f32[)", rows, R"(, 8]) {
  %zero = full() {value = 0} : f32[16, 32]
  %positive = compare(%x, 0.0) {cmp = gt}
  %relu = select(%positive, %x, %zero)
  %below = compare(%x, %b) {cmp = le}
  %clamped = select(%below, %x, %b) : f32[)",
                                                 rows, R"(, 32]
  %y = matmul(%x, %w)
  %big = compare(%y, %t) {cmp = ge}
  %z = select(%big, %y, %t)
  return %relu, %clamped, %z
}
)"),
                                    "f");
    EXPECT_THAT(out, HasSubstr("compare(")) << mesh;
    EXPECT_THAT(out, HasSubstr("select(")) << mesh;
    if (std::string(mesh) != "tp=1") {
      // The partial matmul result is reduced before the comparison.
      EXPECT_GE(Count(out, "all_reduce") + Count(out, "reduce_scatter"), 1) << mesh << out;
    }
  }
}

// An embedding lookup with the table split along its vocabulary (Megatron's vocabulary
// parallelism) on 1-, 2-, 4- and 2x4-device meshes, and its gradient's scatter_add with
// the hidden dimension split. The ids are computed in the program (|x| * 1023 rounded), so
// every random input gives valid ones; a scatter_add into a vocabulary-split base keeps
// the split. Each device looks up its own rows (gather with an
// offset) and the partial rows are summed: an all_reduce for a replicated result, a
// reduce_scatter for a sequence-parallel one. Checked against the one-device program.
// (Two tables: two lookups in one table could share one all_gather of it, which at these
// toy sizes costs less than two collectives of the rows.)
TEST(LowerToSpmd, VocabularyParallelGatherOnSeveralMeshes) {
  for (const char* mesh : {"tp=1", "tp=2", "tp=4", "dp=2, tp=4"}) {
    const bool two_d = std::string(mesh).find("dp") != std::string::npos;
    const std::string batch = two_d ? "8@dp" : "8";
    std::string out = LowerAndCheck(absl::StrCat("mesh @m(", mesh, R"()
func @f(%emb: f32[1024@tp, 16], %emb2: f32[1024@tp, 16], %x: f32[)", batch, R"(, 4], %dy: f32[)", batch,
                                                 R"(, 4, 16@tp]) -> (f32[)", batch,
                                                 R"(, 4, 16], f32[8@tp, 4, 16], f32[1024, 16@tp], f32[1024@tp, 16]) {
  %a = abs(%x)
  %s = mul(%a, 1023.0)
  %ids = convert(%s) : i32[8, 4]
  %y = gather(%emb, %ids) {axis = 0} : f32[)", batch, R"(, 4, 16]
  %sp = gather(%emb2, %ids) {axis = 0} : f32[8@tp, 4, 16]
  %zero = full() {value = 0} : f32[1024, 16]
  %demb = scatter_add(%zero, %ids, %dy) {axis = 0} : f32[1024, 16@tp]
  %vocab = scatter_add(%emb2, %ids, %dy) {axis = 0} : f32[1024@tp, 16]
  return %y, %sp, %demb, %vocab
}
)"),
                                    "f");
    EXPECT_THAT(out, HasSubstr("scatter_add(")) << mesh;
    // Each device's lookup in its own rows, then the partial rows summed; the tables
    // themselves are never gathered.
    EXPECT_THAT(out, HasSubstr("%row_offset = mul(")) << out;
    EXPECT_THAT(out, HasSubstr("gather(%emb, %ids, %row_offset) {axis = 0}")) << out;
    EXPECT_THAT(out, HasSubstr("gather(%emb2, %ids, %row_offset) {axis = 0}")) << out;
    // The vocabulary-split base keeps its split: each device adds its own rows' updates.
    // With the tokens over dp too, each device adds its own tokens' updates into the base,
    // counted once over dp (kept on coordinate 0: %emb2_pt), and an all_reduce over dp
    // sums them: the ids are not gathered.
    EXPECT_THAT(out, HasSubstr(two_d ? "scatter_add(%emb2_pt, %ids" : "scatter_add(%emb2, %ids"))
        << out;
    EXPECT_THAT(out, Not(HasSubstr("all_gather(%ids"))) << out;
    EXPECT_GE(Count(out, "all_reduce"), 1) << out;
    EXPECT_THAT(out, Not(HasSubstr("all_gather(%emb"))) << out;
    // With the batch split over dp as well, the planner reaches the sequence split by an
    // all_reduce, an all_gather over dp and a slice instead.
    if (!two_d) {
      EXPECT_EQ(Count(out, "reduce_scatter"), 1) << out;
    }
  }
}

// cross_entropy and its backward on 1-, 2-, 4- and 2x4-device meshes against the
// one-device program: per-token losses (reduction = none) keep the tokens split; a mean
// needs every token's count, so its logits are gathered. Labels are made from a float
// input (0..7; 7 is ignore_index) since the check draws random values for arguments.
TEST(LowerToSpmd, CrossEntropyOnSeveralMeshes) {
  for (const char* mesh : {"tp=1", "tp=2", "tp=4", "dp=2, tp=4"}) {
    const bool two_d = std::string(mesh).find("dp") != std::string::npos;
    const std::string rows = two_d ? "16@(dp, tp)" : "16@tp";
    const std::string attrs =
        "{reduction = none, ignore_index = 7, label_smoothing = 0.1, z_loss = 0.01}";
    std::string out = LowerAndCheck(
        absl::StrCat("mesh @m(", mesh, ")\n", "func @f(%x: f32[", rows, ", 8], %r: f32[", rows,
                     "], %g: f32[", rows, "]) -> (f32[", rows, "], f32[], f32[", rows, ", 8]) {\n",
                     "  %a = abs(%r)\n  %s = mul(%a, 7.49)\n  %labels = convert(%s) : i64[16]\n",
                     "  %tok, %lse = cross_entropy(%x, %labels) ", attrs, "\n",
                     "  %mean, %lse2 = cross_entropy(%x, %labels) {label_smoothing = 0.1}\n",
                     "  %dx = cross_entropy_grad(%x, %labels, %lse, %g) ", attrs, "\n",
                     "  return %tok, %mean, %dx\n}\n"),
        "f");
    EXPECT_EQ(Count(out, "cross_entropy"), 2) << mesh << out;
    EXPECT_EQ(Count(out, "cross_entropy_grad"), 1) << mesh << out;
  }
}

TEST(LowerToSpmd, ConstantsAreBuiltLocally) {
  std::string out = LowerAndCheck(R"(mesh @m(tp=4)
func @f(%x: f32[8@tp, 4]) -> f32[8@tp, 4] {
  %c = full() {value = 2.0} : f32[8, 4]
  %y = mul(%x, %c)
  return %y
}
)",
                                  "f");
  EXPECT_THAT(out, HasSubstr("full() {value = 2.0} : f32[2, 4]"));
  EXPECT_EQ(Count(out, "dynamic_slice"), 0) << out;
}

TEST(LowerToSpmd, KeepsTheFunctionAndItsSignature) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
func @f(%x: f32[4@tp]) -> f32[4] {
  %y = neg(%x)
  return %y
}
func @g(%x: f32[4]) -> f32[4] on @m {
  return %x
}
)");
  ASSERT_NE(m, nullptr);
  Function* f = m->FindFunction("f");
  std::vector<Type> args = f->arg_types(), results = f->result_types();
  ASSERT_TRUE(LowerToSpmd(*m).ok());
  EXPECT_EQ(m->FindFunction("f"), f);
  EXPECT_TRUE(f->is_spmd());
  EXPECT_EQ(f->arg_types(), args);
  EXPECT_EQ(f->result_types(), results);
  EXPECT_EQ(f->body()->argument(0)->type().ToString(), "f32[2]");
  EXPECT_EQ(m->functions()[1]->name(), "g");
  EXPECT_TRUE(m->FindFunction("g")->is_spmd());
  EXPECT_EQ(PrintFunction(*m->FindFunction("g")),
            "spmd func @g(%x: f32[4]) -> f32[4] on @m {\n  return %x\n}\n");
}

TEST(LowerToSpmd, LeavesSpmdFunctionsAndFunctionsWithoutAMeshAlone) {
  constexpr char kText[] = R"(func @g(%x: f32[4]) -> f32[4] {
  %y = neg(%x) : f32[4]
  return %y
}
)";
  EXPECT_EQ(testing::TransformText(kText, [](Module& m) { EXPECT_TRUE(LowerToSpmd(m).ok()); }),
            kText);
  constexpr char kSpmd[] = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4@tp]) -> f32[4@tp] on @m {
  %y = neg(%x) : f32[2]
  return %y
}
)";
  EXPECT_EQ(testing::TransformText(kSpmd, [](Module& m) { EXPECT_TRUE(LowerToSpmd(m).ok()); }),
            kSpmd);
}

TEST(LowerToSpmd, AFailureLeavesTheFunctionAsItWas) {
  // A global function built without checks, whose matmul claims a wrong result shape:
  // the lowering fails at the matmul, after lowering the neg before it.
  Module m;
  Mesh* mesh = m.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 2, {}}}));
  Type x = Type::Tensor(ElementType::kF32, {8, 4}, {{"tp"}, {}});
  Type w = Type::Tensor(ElementType::kF32, {4, 6});
  Type bad = Type::Tensor(ElementType::kF32, {8, 5});
  Function* f = AddFunction(m, "f", false, mesh, {x, w}, {bad}, {"x", "w"});
  OpBuilder b(f);
  absl::StatusOr<Value*> n = b.Unary(OpKind::kNeg, f->body()->argument(0));
  ASSERT_TRUE(n.ok());
  Operation* matmul =
      b.CreateUnchecked(OpKind::kMatmul, {*n, f->body()->argument(1)}, {bad});
  b.Return({matmul->result(0)});
  std::string before = PrintModule(m);
  DiagnosticEngine diagnostics;
  absl::Status s = LowerToSpmd(*f, &diagnostics);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("'matmul'"));
  EXPECT_TRUE(diagnostics.has_errors());
  EXPECT_FALSE(f->is_spmd());
  EXPECT_EQ(f->body()->argument(0)->type(), x);
  EXPECT_EQ(PrintModule(m), before);
}

TEST(LowerToSpmd, WithoutPropagationUsesTheWrittenLayouts) {
  // Every layout as written: %a is replicated (no sharding written), so the partial
  // matmul result is all-reduced before gelu.
  std::string out = testing::TransformText(R"(mesh @m(tp=2)
func @f(%x: f32[8, 16@tp], %w: f32[16@tp, 8]) -> f32[8, 8] {
  %a = matmul(%x, %w)
  %b = gelu(%a)
  return %b
}
)",
                                           [](Module& m) { EXPECT_TRUE(LowerToSpmd(m).ok()); });
  EXPECT_THAT(out, HasSubstr("%a = all_reduce(%0) {axis = tp} : f32[8, 8]"));
}

TEST(LowerToSpmd, EveryExampleOfTheSpecPassesOnTheCpuBackend) {
  // ag_matmul (1-D, 8 devices): sequence-parallel rows gathered into a column-parallel
  // matmul.
  std::string out = LowerAndCheck(R"(mesh @m(tp=8)
func @ag_matmul(%a: f32[1024@tp, 256], %b: f32[256, 512@tp]) -> f32[1024, 512@tp] {
  %c = matmul(%a, %b)
  return %c
}
)",
                                  "ag_matmul");
  EXPECT_THAT(out, HasSubstr("%a_ag = all_gather(%a) {axis = tp, dim = 0} : f32[1024, 256]"));
  EXPECT_EQ(Count(out, "all_gather"), 1) << out;
  EXPECT_THAT(out, Not(HasSubstr("all_to_all")));
  // Several seeds for the transformer block.
  for (uint64_t seed : {1, 2}) LowerAndCheck(kTransformerBlock, "block", seed);
}

TEST(LowerToSpmdPass, ReportsTheCommunication) {
  std::unique_ptr<Module> m = testing::ParseForTest(kTransformerBlock);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*m).ok());
  FunctionCommReport report = ComputeCommReport(*m->functions()[0]);
  ASSERT_EQ(report.collectives.size(), 2u);
  EXPECT_EQ(report.collectives[0].kind, OpKind::kAllGather);
  EXPECT_EQ(report.collectives[0].count, 2);
  EXPECT_EQ(report.collectives[1].kind, OpKind::kReduceScatter);
  EXPECT_EQ(report.collectives[1].count, 2);
  // Each moves 3/4 of a 256 KiB activation.
  EXPECT_DOUBLE_EQ(report.total_bytes(), 4 * 196608.0);
}

}  // namespace
}  // namespace commir::sharding
