#include "transforms/sharding/propagate.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/pass.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

std::string Propagate(const std::string& text, int iterations = 1) {
  PropagationOptions options;
  options.iterations = iterations;
  return testing::TransformText(text, [&](Module& m) {
    absl::Status s = PropagateSharding(m, options);
    EXPECT_TRUE(s.ok()) << s;
  });
}

// The printed type of value `%name` in printed module text.
std::string TypeOf(const std::string& printed, const std::string& name) {
  size_t at = printed.find(absl::StrCat("  %", name, " = "));
  if (at == std::string::npos) return "<no " + name + ">";
  size_t colon = printed.find(" : ", at);
  size_t end = printed.find('\n', at);
  return printed.substr(colon + 3, end - colon - 3);
}

constexpr char kMlp[] = R"(mesh @m(tp=4)

func @mlp(%x: f32[256@tp, 128], %w1: f32[128, 512@tp], %w2: f32[512@tp, 128]) -> f32[256@tp, 128] {
  %h = matmul(%x, %w1) : f32[256, 512@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[256@tp, 128]
  return %y
}
)";

TEST(Propagate, MlpKeepsItsAnnotations) {
  std::string out = Propagate(kMlp);
  EXPECT_EQ(TypeOf(out, "h"), "f32[256, 512@tp]");
  EXPECT_EQ(TypeOf(out, "a"), "f32[256, 512@tp]");
  EXPECT_EQ(TypeOf(out, "y"), "f32[256@tp, 128]");
}

TEST(Propagate, FreeMatmulResultStaysPartialUntilTheReturn) {
  std::string out = Propagate(R"(mesh @m(dp=2, tp=2)
func @mlp(%x: f32[64@dp, 32], %w1: f32[32, 128@tp], %w2: f32[128@tp, 32]) -> f32[64@dp, 32] {
  %h = matmul(%x, %w1) : f32[64@dp, 128@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2)
  return %y
}
)");
  EXPECT_EQ(TypeOf(out, "y"), "f32[64@dp, 32] partial(tp)");
}

TEST(Propagate, TransformerBlockKeepsTheResidualStreamSequenceParallel) {
  std::string out = Propagate(R"(mesh @m(tp=4)
func @block(%x: f32[256@tp, 256], %g: f32[256], %b: f32[256], %wq: f32[256, 256@tp],
            %wo: f32[256@tp, 256]) -> f32[256@tp, 256] {
  %h = layernorm(%x, %g, %b)
  %q = matmul(%h, %wq) : f32[256, 256@tp]
  %k = matmul(%h, %wq) : f32[256, 256@tp]
  %attn = matmul(%q, %wo) : f32[256@tp, 256]
  %r = add(%x, %attn)
  return %r
}
)");
  // The norm runs on the sequence-split rows; the matmuls gather its output.
  EXPECT_EQ(TypeOf(out, "h"), "f32[256@tp, 256]");
  EXPECT_EQ(TypeOf(out, "r"), "f32[256@tp, 256]");
}

TEST(Propagate, FillsInFromArgumentsForward) {
  std::string out = Propagate(R"(mesh @m(dp=2, tp=2)
func @f(%x: f32[8@dp, 16@tp], %w: f32[16@tp, 4]) -> f32[8, 4] {
  %e = exp(%x) : f32[8, 16]
  %s = softmax(%e) {dim = 0}
  %t = transpose(%s) {perm = [1, 0]}
  %r = reshape(%t) : f32[16, 2, 4]
  %m = reduce_max(%x) {dims = [1]}
  %p = matmul(%x, %w)
  return %p
}
)");
  // `: f32[8, 16]` writes no sharding: the layout is free and follows %x.
  EXPECT_EQ(TypeOf(out, "e"), "f32[8@dp, 16@tp]");
  // A small softmax along the split rows gathers them rather than combine statistics.
  EXPECT_EQ(TypeOf(out, "s"), "f32[8, 16@tp]");
  EXPECT_EQ(TypeOf(out, "t"), "f32[16@tp, 8]");
  EXPECT_EQ(TypeOf(out, "r"), "f32[16@tp, 2, 4]");
  // A max over split columns is reduced right away (types cannot hold a pending max).
  EXPECT_EQ(TypeOf(out, "m"), "f32[8@dp]");
  // A contraction over split columns is a partial sum.
  EXPECT_EQ(TypeOf(out, "p"), "f32[8@dp, 4] partial(tp)");
}

TEST(Propagate, FillsInFromUsesBackward) {
  std::string out = Propagate(R"(mesh @m(tp=4)
func @f(%x: f32[64, 32]) -> f32[64@tp, 32] {
  %a = tanh(%x)
  %b = neg(%a)
  return %b
}
)");
  // The request on the result reaches back to %a: every op works on a quarter.
  EXPECT_EQ(TypeOf(out, "a"), "f32[64@tp, 32]");
  EXPECT_EQ(TypeOf(out, "b"), "f32[64@tp, 32]");
}

TEST(Propagate, UserAnnotationsAlwaysWin) {
  std::string out = Propagate(R"(mesh @m(tp=4)
func @f(%x: f32[64@tp, 32]) -> f32[64@tp, 32] {
  %a = tanh(%x) : f32[64, 32@tp]
  %b = reshard(%a) : f32[64, 32]
  %c = neg(%b) : f32[64, 32] partial(tp)
  %d = sigmoid(%c)
  return %d
}
)");
  EXPECT_EQ(TypeOf(out, "a"), "f32[64, 32@tp]");
  // An unsharded reshard requires replication.
  EXPECT_EQ(TypeOf(out, "b"), "f32[64, 32]");
  EXPECT_EQ(TypeOf(out, "c"), "f32[64, 32] partial(tp)");
  EXPECT_EQ(TypeOf(out, "d"), "f32[64@tp, 32]");
}

TEST(Propagate, ElementwiseLayoutsInferredByTheParserAreFree) {
  // The parser gives %a the layout of its first operand; that is not a constraint, and
  // following %y instead saves an all_to_all.
  std::string text = R"(mesh @m(tp=4)
func @f(%x: f32[64@tp, 32], %y: f32[64, 32@tp]) -> f32[64, 32@tp] {
  %a = add(%x, %y)
  %b = reshard(%a) : f32[64, 32@tp]
  return %b
}
)";
  std::unique_ptr<Module> m = testing::ParseForTest(text);
  ASSERT_NE(m, nullptr);
  Operation* add = m->functions()[0]->body()->front();
  EXPECT_EQ(add->result(0)->type().ToString(), "f32[64@tp, 32]");
  EXPECT_FALSE(IsLayoutConstraint(*add, 0));
  EXPECT_TRUE(IsLayoutConstraint(*add->next(), 0));  // reshard
  EXPECT_EQ(TypeOf(Propagate(text), "a"), "f32[64, 32@tp]");
  // Written differently from what the parser infers, the same layout is a constraint.
  std::unique_ptr<Module> written = testing::ParseForTest(R"(mesh @m(tp=4)
func @f(%x: f32[64@tp, 32]) -> f32[64, 32] {
  %a = tanh(%x) : f32[64, 32@tp]
  %b = tanh(%x) : f32[64, 32]
  return %a
}
)");
  ASSERT_NE(written, nullptr);
  EXPECT_TRUE(IsLayoutConstraint(*written->functions()[0]->body()->front(), 0));
  // An annotation without a sharding states the shape only.
  EXPECT_FALSE(IsLayoutConstraint(*written->functions()[0]->body()->front()->next(), 0));
}

TEST(Propagate, SequenceShardedAttentionKeepsQueriesSplit) {
  std::string out = Propagate(R"(mesh @m(sp=4)
func @attention(%q: f32[1, 4, 512@sp, 64], %k: f32[1, 4, 512@sp, 64], %v: f32[1, 4, 512@sp, 64]) -> f32[1, 4, 512@sp, 64] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)");
  EXPECT_EQ(TypeOf(out, "o"), "f32[1, 4, 512@sp, 64]");
}

TEST(Propagate, IsDeterministicAndIdempotent) {
  std::string once = Propagate(kMlp);
  EXPECT_EQ(Propagate(kMlp), once);
  EXPECT_EQ(Propagate(once), once);
  EXPECT_EQ(Propagate(kMlp, 3), once);
}

TEST(Propagate, LeavesSpmdFunctionsAndFunctionsWithoutAMeshAlone) {
  constexpr char kSpmd[] = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4@tp]) -> f32[4@tp] on @m {
  %y = neg(%x) : f32[2]
  return %y
}
)";
  EXPECT_EQ(Propagate(kSpmd), kSpmd);
  constexpr char kNoMesh[] = R"(func @g(%x: f32[4]) -> f32[4] {
  %y = neg(%x) : f32[4]
  return %y
}
)";
  EXPECT_EQ(Propagate(kNoMesh), kNoMesh);
}

TEST(PropagateShardingPass, RejectsAnOutOfRangeIterationCount) {
  // Constructed directly, so no parser checked the range: the pass does.
  PropagateShardingPass pass({.iterations = 0});
  std::unique_ptr<Module> m = testing::ParseForTest(kMlp);
  ASSERT_NE(m, nullptr);
  absl::Status s = pass.Run(*m);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("iterations"));
  PropagateShardingPass two({.iterations = 2});
  EXPECT_TRUE(two.Run(*m).ok());
}

// Runs propagate-sharding{explain=EXPLAIN} on `text`; returns the pass's status.
absl::Status RunExplaining(const std::string& text, const std::string& explain,
                           std::vector<PassRemark>* remarks, std::string* printed = nullptr,
                           int64_t iterations = 1) {
  PropagateShardingPass pass({.iterations = iterations, .explain = explain});
  std::unique_ptr<Module> m = testing::ParseForTest(text);
  if (m == nullptr) return absl::InternalError("no module");
  absl::Status status = pass.Run(*m);
  *remarks = pass.remarks();
  if (printed != nullptr) *printed = PrintModule(*m);
  return status;
}

TEST(PropagateShardingPass, ExplainsTheChoiceForEachNamedValueAtItsOp) {
  std::vector<PassRemark> remarks;
  std::string printed;
  // Names with or without '%', separated by commas or blanks.
  ASSERT_TRUE(RunExplaining(kMlp, "%y, a", &remarks, &printed).ok());
  ASSERT_EQ(remarks.size(), 2u);
  // In program order: %a (line 5) before %y (line 6).
  EXPECT_EQ(remarks[0].loc.line, 5);
  EXPECT_THAT(remarks[0].message,
              HasSubstr("propagate-sharding: strategy of %a = gelu(%h) in @mlp: 2 candidates"));
  EXPECT_EQ(remarks[1].loc.line, 6);
  EXPECT_EQ(remarks[1].loc.col, 8);  // the op's location: its name
  EXPECT_THAT(remarks[1].message, HasSubstr("strategy of %y = matmul(%a, %w2) in @mlp"));
  // The explained winner gives the layout %y ends up with (pending its reduce_scatter).
  // Its compute: 2 x 256 x 512 x 128 f32 FLOPs at 67 TFLOP/s, a quarter per device, in
  // bytes at 360 GB/s: 45073.
  EXPECT_THAT(remarks[1].message,
              HasSubstr("gives [-, -] partial(tp); comm 1146880, compute 45073, work 81920  <- chosen"));
  // The plan that keeps the weights where they are costs no less here, so the first
  // (free) plan is kept, and it is the one explained.
  EXPECT_THAT(remarks[1].message,
              HasSubstr("chosen: candidate 1 (least communication plus compute)"));
  EXPECT_EQ(TypeOf(printed, "y"), "f32[256@tp, 128]");
}

// The explanation is of the query the op saw in the forward round: the gather this op
// itself makes is not yet available there (explained from the finished round, it was,
// and the choice was shown at no cost).
TEST(PropagateShardingPass, ExplainsAGatherAtItsCostNotAsAlreadyMade) {
  constexpr char kMerge[] = R"(mesh @m(tp=2)
func @f(%x: f32[8, 4@tp]) -> f32[32] {
  %r = reshape(%x) : f32[32]
  %s = exp(%r)
  return %s
}
)";
  std::vector<PassRemark> remarks;
  ASSERT_TRUE(RunExplaining(kMerge, "%r", &remarks).ok());
  ASSERT_EQ(remarks.size(), 1u);
  // The all_gather of 8 x 4 floats over 2 devices: 64 bytes plus one collective's latency.
  EXPECT_THAT(remarks[0].message,
              HasSubstr("needs %x [-, -]; gives [-]; comm 1048640, compute 0, work 64  <- chosen"));
}

TEST(PropagateShardingPass, ExplainsOnceWhateverTheRoundsWithTheLayoutKept) {
  std::vector<PassRemark> remarks;
  std::string printed;
  ASSERT_TRUE(RunExplaining(kMlp, "%a", &remarks, &printed, 3).ok());
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_THAT(remarks[0].message, HasSubstr("gives [-, tp]; comm 0, compute 28171, work 65536  <- chosen"));
  EXPECT_EQ(TypeOf(printed, "a"), "f32[256, 512@tp]");
}

TEST(PropagateShardingPass, AnUnknownValueToExplainIsAnError) {
  std::vector<PassRemark> remarks;
  absl::Status status = RunExplaining(kMlp, "%y,%nope", &remarks);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "explain: no value %nope in a global function with a mesh");
  EXPECT_TRUE(remarks.empty());
  // An argument is known, but nothing chose its layout.
  EXPECT_EQ(RunExplaining(kMlp, "%w1", &remarks).message(),
            "explain: %w1 is an argument of @mlp: its layout is given, not chosen");
}

TEST(PropagateShardingPass, WithoutExplainThereAreNoRemarks) {
  std::vector<PassRemark> remarks;
  ASSERT_TRUE(RunExplaining(kMlp, "", &remarks).ok());
  EXPECT_TRUE(remarks.empty());
}

}  // namespace
}  // namespace commir::sharding
