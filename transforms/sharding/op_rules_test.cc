#include "transforms/sharding/op_rules.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "transforms/sharding/strategy_explanation.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

// Parses a module whose function @f computes `%r` with one op, and answers questions
// about that op's rule.
class OneOp {
 public:
  explicit OneOp(const std::string& text) : module_(testing::ParseForTest(text)) {
    if (module_ == nullptr) return;
    function_ = module_->functions()[0];
    for (Operation* op : *function_->body()) {
      if (op->num_results() > 0 && op->result(0)->name() == "r") op_ = op;
    }
    EXPECT_NE(op_, nullptr) << "no op defines %r";
    absl::StatusOr<OpRule> rule = RuleFor(*op_);
    EXPECT_TRUE(rule.ok()) << rule.status();
    if (rule.ok()) rule_ = *rule;
  }

  bool ok() const { return op_ != nullptr && rule_.has_value(); }
  const OpRule& rule() const { return *rule_; }
  const Mesh& mesh() const { return *function_->mesh(); }
  Function* function() const { return function_; }

  // The strategy chosen with the operands' written layouts known and the written result
  // layouts as targets (what lower-to-spmd asks), as
  //   "operand layouts -> natural result layouts".
  std::string Lowered() const { return Describe(Choose(/*with_targets=*/true)); }
  // The same without result targets (what the forward pass asks for a free result).
  std::string Forward() const { return Describe(Choose(/*with_targets=*/false)); }
  Choice Choose(bool with_targets) const { return ChooseStrategy(Query(with_targets)); }
  StrategyQuery Query(bool with_targets) const {
    StrategyQuery q;
    q.op = op_;
    q.rule = &*rule_;
    q.mesh = &mesh();
    for (int i = 0; i < op_->num_operands(); ++i) {
      Value* v = op_->operand(i);
      if (rule_->operands[i].is_tensor) {
        q.operands.push_back(Layout::Of(v->type(), mesh()));
      } else {
        q.operands.push_back(std::nullopt);
      }
    }
    for (Value* r : op_->results()) {
      if (with_targets && r->type().is_tensor()) {
        q.targets.push_back(Layout::Of(r->type(), mesh()));
      } else {
        q.targets.push_back(std::nullopt);
      }
    }
    return q;
  }

  // "operand factors | result factors" with factor names f0, f1, ... and kinds.
  std::string Factors() const {
    auto tensor = [&](const TensorFactors& t) {
      if (!t.is_tensor) return std::string("index");
      return absl::StrCat("[", absl::StrJoin(t.dims, ", ", [&](std::string* out, const std::vector<int>& dim) {
                            std::vector<std::string> names;
                            for (int f : dim) names.push_back(absl::StrCat(Kind(f), rule_->sizes[f]));
                            out->append(names.empty() ? "_" : absl::StrJoin(names, "*"));
                          }),
                          "]");
    };
    std::vector<std::string> operands, results;
    for (const TensorFactors& t : rule_->operands) operands.push_back(tensor(t));
    for (const TensorFactors& t : rule_->results) results.push_back(tensor(t));
    return absl::StrCat(absl::StrJoin(operands, " "), " -> ", absl::StrJoin(results, " "));
  }

 private:
  std::string Kind(int f) const {
    switch (rule_->kinds[f]) {
      case FactorKind::kPass: return "p";
      case FactorKind::kSum: return "sum";
      case FactorKind::kMax: return "max";
      case FactorKind::kStats: return "stats";
      case FactorKind::kReplicate: return "rep";
    }
    return "";
  }

  std::string Describe(const Choice& c) const {
    std::vector<std::string> operands, results;
    for (size_t i = 0; i < c.operands.size(); ++i) {
      if (rule_->operands[i].is_tensor) operands.push_back(c.operands[i].ToString());
    }
    for (const Layout& l : c.results) results.push_back(l.ToString());
    return absl::StrCat(absl::StrJoin(operands, " "), " -> ", absl::StrJoin(results, " "));
  }

  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
  Operation* op_ = nullptr;
  std::optional<OpRule> rule_;
};

std::string F(const std::string& mesh, const std::string& args, const std::string& body,
              const std::string& result) {
  return absl::StrCat("mesh @m(", mesh, ")\nfunc @f(", args, ") -> ", result, " {\n  ", body,
                      "\n  return %r\n}\n");
}

// ---- Elementwise -------------------------------------------------------------------

TEST(ElementwiseRule, FollowsTheOperandsAndBroadcasts) {
  OneOp op(F("tp=4", "%x: f32[8@tp, 4], %b: f32[4]", "%r = add(%x, %b)", "f32[8, 4]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p8, p4] [p4] -> [p8, p4]");
  EXPECT_EQ(op.rule().partial_mode, PartialMode::kAll);
  EXPECT_EQ(op.Forward(), "[tp, -] [-] -> [tp, -]");
}

TEST(ElementwiseRule, BroadcastDimsOfSizeOneTakeNoFactor) {
  OneOp op(F("tp=4", "%x: f32[8, 4@tp], %b: f32[1, 4]", "%r = mul(%x, %b)", "f32[8, 4]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p8, p4] [_, p4] -> [p8, p4]");
  EXPECT_EQ(op.Forward(), "[-, tp] [-, tp] -> [-, tp]");
}

TEST(ElementwiseRule, LiteralsTakeNoLayout) {
  OneOp op(F("tp=2", "%x: f32[4@tp]", "%r = mul(%x, 0.5)", "f32[4]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p4] index -> [p4]");
  EXPECT_EQ(op.rule().partial_mode, PartialMode::kAny);
}

TEST(ElementwiseRule, PartialPassesThroughLinearOpsOnly) {
  // add of equally partial operands stays partial.
  OneOp add(F("tp=2", "%x: f32[4] partial(tp), %y: f32[4] partial(tp)", "%r = add(%x, %y)",
              "f32[4]"));
  EXPECT_EQ(add.Forward(), "[-] partial(tp) [-] partial(tp) -> [-] partial(tp)");
  // mul by a non-partial factor stays partial.
  OneOp mul(F("tp=2", "%x: f32[4], %y: f32[4] partial(tp)", "%r = mul(%x, %y)", "f32[4]"));
  EXPECT_EQ(mul.Forward(), "[-] [-] partial(tp) -> [-] partial(tp)");
  // div: only the numerator.
  OneOp div(F("tp=2", "%x: f32[4], %y: f32[4] partial(tp)", "%r = div(%x, %y)", "f32[4]"));
  EXPECT_EQ(div.Forward(), "[-] [-] -> [-]");
  // Nonlinear ops need the sum.
  OneOp exp(F("tp=2", "%x: f32[4] partial(tp)", "%r = exp(%x)", "f32[4]"));
  EXPECT_EQ(exp.Forward(), "[-] -> [-]");
  // Widening conversions are exact, so linear; narrowing ones are not.
  OneOp widen(F("tp=2", "%x: bf16[4] partial(tp)", "%r = convert(%x) : f32[4]", "f32[4]"));
  EXPECT_EQ(widen.rule().partial_mode, PartialMode::kFirst);
  OneOp narrow(F("tp=2", "%x: f32[4] partial(tp)", "%r = convert(%x) : bf16[4]", "bf16[4]"));
  EXPECT_EQ(narrow.rule().partial_mode, PartialMode::kNone);
}

// ---- Matmul ------------------------------------------------------------------------

TEST(MatmulRule, BatchMAndNSplitLocally) {
  OneOp op(F("dp=2, tp=2", "%a: f32[4@dp, 8, 16], %b: f32[4, 16, 8@tp]",
             "%r = matmul(%a, %b)", "f32[4, 8, 8]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p4, p8, sum16] [p4, sum16, p8] -> [p4, p8, p8]");
  EXPECT_EQ(op.Forward(), "[dp, -, -] [dp, -, tp] -> [dp, -, tp]");
}

TEST(MatmulRule, ASplitContractingDimGivesAPartialResult) {
  OneOp op(F("tp=4", "%a: f32[8, 16@tp], %b: f32[16@tp, 8]", "%r = matmul(%a, %b)", "f32[8, 8]"));
  EXPECT_EQ(op.Forward(), "[-, tp] [tp, -] -> [-, -] partial(tp)");
  // Asked for rows split, a reduce_scatter of that partial is the cheapest.
  OneOp rows(F("tp=4", "%a: f32[8, 16@tp], %b: f32[16@tp, 8]", "%r = matmul(%a, %b) : f32[8@tp, 8]",
               "f32[8, 8]"));
  EXPECT_EQ(rows.Lowered(), "[-, tp] [tp, -] -> [-, -] partial(tp)");
}

TEST(MatmulRule, TransposedOperandsMapTheirDims) {
  OneOp op(F("tp=2", "%a: f32[16, 8@tp], %b: f32[6@tp, 16]",
             "%r = matmul(%a, %b) {transpose_a, transpose_b}", "f32[8, 6]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[sum16, p8] [p6, sum16] -> [p8, p6]");
  EXPECT_EQ(op.Forward(), "[-, tp] [-, -] -> [tp, -]");
}

TEST(MatmulRule, BroadcastBatchDimsTakeNoFactorInTheSmallerOperand) {
  OneOp op(F("tp=2", "%a: f32[2@tp, 4, 8], %b: f32[8, 4]", "%r = matmul(%a, %b)", "f32[2, 4, 4]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p2, p4, sum8] [sum8, p4] -> [p2, p4, p4]");
  EXPECT_EQ(op.Forward(), "[tp, -, -] [-, -] -> [tp, -, -]");
}

TEST(MatmulRule, OnePartialOperandPassesThrough) {
  OneOp op(F("dp=2, tp=2", "%a: f32[8, 16@tp] partial(dp), %b: f32[16@tp, 8]",
             "%r = matmul(%a, %b)", "f32[8, 8]"));
  EXPECT_EQ(op.Forward(), "[-, tp] partial(dp) [tp, -] -> [-, -] partial(dp, tp)");
}

// ---- Reductions, softmax, norms -------------------------------------------------------

TEST(ReduceRule, ReducedDimsAreSummedOrMaxed) {
  OneOp sum(F("tp=4", "%x: f32[8, 16@tp]", "%r = reduce_sum(%x) {dims = [1]}", "f32[8]"));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum.Factors(), "[p8, sum16] -> [p8]");
  EXPECT_EQ(sum.Forward(), "[-, tp] -> [-] partial(tp)");
  OneOp max(F("tp=4", "%x: f32[8, 16@tp]", "%r = reduce_max(%x) {dims = [1]}", "f32[8]"));
  EXPECT_EQ(max.Factors(), "[p8, max16] -> [p8]");
  EXPECT_EQ(max.Forward(), "[-, tp] -> [-] max(tp)");
  EXPECT_EQ(max.rule().partial_mode, PartialMode::kNone);
  OneOp keep(F("tp=4", "%x: f32[8@tp, 16]", "%r = reduce_mean(%x) {dims = [0], keepdim}",
               "f32[1, 16]"));
  EXPECT_EQ(keep.Factors(), "[sum8, p16] -> [_, p16]");
  EXPECT_EQ(keep.Forward(), "[tp, -] -> [-, -] partial(tp)");
}

TEST(SoftmaxRule, ASplitDimCombinesStatisticsWhenThatIsCheaper) {
  OneOp big(F("tp=4", "%x: f32[1024, 4096@tp]", "%r = softmax(%x) {dim = 1}", "f32[1024, 4096]"));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big.Factors(), "[p1024, stats4096] -> [p1024, stats4096]");
  EXPECT_EQ(big.Forward(), "[-, tp] -> [-, tp]");
  Choice c = big.Choose(false);
  // Two all_reduces of the per-row f32 statistics [1024, 1] (4 KiB each).
  EXPECT_DOUBLE_EQ(StatsBytes(Type::Tensor(ElementType::kF32, {1024, 4096}), big.rule(), c.strategy,
                              big.mesh()),
                   2 * (2 * 4096.0 * 3 / 4 + kCollectiveLatencyBytes));
  // For a small tensor one all_gather costs less than two all_reduces.
  OneOp small(F("tp=4", "%x: f32[8, 64@tp]", "%r = softmax(%x) {dim = 1}", "f32[8, 64]"));
  EXPECT_EQ(small.Forward(), "[-, -] -> [-, -]");
}

TEST(NormRule, ParametersFollowTheLastDim) {
  OneOp op(F("dp=2, tp=2", "%x: f32[1024@dp, 4096@tp], %w: f32[4096], %b: f32[4096]",
             "%r = layernorm(%x, %w, %b)", "f32[1024, 4096]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p1024, stats4096] [stats4096] [stats4096] -> [p1024, stats4096]");
  EXPECT_EQ(op.rule().stats_all_reduces, 2);
  // Big rows: the statistics are combined and the parameters sliced locally.
  EXPECT_EQ(op.Forward(), "[dp, tp] [tp] [tp] -> [dp, tp]");
  // Small rows: one all_gather is cheaper than two all_reduces.
  OneOp small(F("dp=2, tp=2", "%x: f32[8@dp, 64@tp], %w: f32[64], %b: f32[64]",
                "%r = layernorm(%x, %w, %b)", "f32[8, 64]"));
  EXPECT_EQ(small.Forward(), "[dp, -] [-] [-] -> [dp, -]");
  OneOp rms(F("tp=2", "%x: f32[8, 4096@tp], %w: f32[4096]", "%r = rmsnorm(%x, %w)", "f32[8, 4096]"));
  EXPECT_EQ(rms.rule().stats_all_reduces, 1);
}

// ---- Attention ---------------------------------------------------------------------

TEST(AttentionRule, BatchHeadsAndQuerySequenceSplitLocally) {
  OneOp op(F("dp=2, sp=2",
             "%q: f32[2@dp, 4, 8@sp, 16], %k: f32[2@dp, 4, 8@sp, 16], %v: f32[2@dp, 4, 8@sp, 16]",
             "%r = attention(%q, %k, %v) {causal}", "f32[2, 4, 8, 16]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(),
            "[p2, p4*p1, p8, rep16] [p2, p4, rep8, rep16] [p2, p4, rep8, p16] -> [p2, p4*p1, p8, p16]");
  // The key/value sequence is gathered.
  EXPECT_EQ(op.Forward(), "[dp, -, sp, -] [dp, -, -, -] [dp, -, -, -] -> [dp, -, sp, -]");
}

TEST(AttentionRule, GroupedHeadsSplitOverKeyValueHeadsFirst) {
  OneOp op(F("dp=2, tp=2",
             "%q: f32[1, 8@(dp, tp), 4, 8], %k: f32[1, 2@dp, 4, 8], %v: f32[1, 2@dp, 4, 8]",
             "%r, %lse = attention(%q, %k, %v)", "f32[1, 8, 4, 8]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(),
            "[p1, p2*p4, p4, rep8] [p1, p2, rep4, rep8] [p1, p2, rep4, p8] -> "
            "[p1, p2*p4, p4, p8] [p1, p2*p4, p4]");
  EXPECT_EQ(op.Forward(),
            "[-, (dp, tp), -, -] [-, dp, -, -] [-, dp, -, -] -> [-, (dp, tp), -, -] [-, (dp, tp), -]");
}

TEST(AttentionRule, AMeshWiderThanTheKeyValueHeadsSplitsQueryHeadsAlone) {
  // 4 devices, 2 key/value heads: the query heads split alone, the key/value heads are
  // whole on every device (the decomposition keeps each device's own).
  OneOp op(F("tp=4", "%q: f32[1, 4@tp, 8, 8], %k: f32[1, 2, 8, 8], %v: f32[1, 2, 8, 8]",
             "%r = attention(%q, %k, %v) {causal}", "f32[1, 4, 8, 8]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p1, p4, p8, rep8] [p1, rep2, rep8, rep8] [p1, rep2, rep8, p8] -> [p1, p4, p8, p8]");
  EXPECT_EQ(op.Forward(), "[-, tp, -, -] [-, -, -, -] [-, -, -, -] -> [-, tp, -, -]");
  // Two devices divide the key/value heads: the nested form.
  OneOp narrow(F("tp=2", "%q: f32[1, 4@tp, 8, 8], %k: f32[1, 2@tp, 8, 8], %v: f32[1, 2@tp, 8, 8]",
                 "%r = attention(%q, %k, %v) {causal}", "f32[1, 4, 8, 8]"));
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(narrow.Forward(), "[-, tp, -, -] [-, tp, -, -] [-, tp, -, -] -> [-, tp, -, -]");
}

TEST(AttentionRule, IndexOperandsTakeNoLayout) {
  OneOp op(F("tp=2", "%q: f32[1, 2, 4@tp, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]",
             "%p = full() {value = 0} : index\n  %r = attention(%q, %k, %v, %p) {causal}",
             "f32[1, 2, 4, 8]"));
  ASSERT_TRUE(op.ok());
  EXPECT_FALSE(op.rule().operands[3].is_tensor);
  EXPECT_EQ(op.Forward(), "[-, -, tp, -] [-, -, -, -] [-, -, -, -] -> [-, -, tp, -]");
}

// ---- What the strategy choice knows beyond the operands' layouts ---------------------

// matmul(%h, %w) with %h sequence-split and %w column-split: gathering %h costs a whole
// activation (12 MB), gathering the (smaller) weight and moving the result less (two
// collectives of 0.8 MB).
constexpr char kProjection[] = R"(mesh @m(tp=4)
func @f(%h: f32[4096@tp, 1024], %w: f32[1024, 256@tp]) -> f32[4096, 256@tp] {
  %r = matmul(%h, %w)
  return %r
}
)";

Choice ChooseProjection(const OneOp& op, std::vector<std::vector<Layout>> available,
                        std::vector<int> sharing, std::vector<bool> pinned) {
  StrategyQuery q;
  Operation* matmul = nullptr;
  for (Operation* o : *op.function()->body()) {
    if (o->Is(OpKind::kMatmul)) matmul = o;
  }
  q.op = matmul;
  q.rule = &op.rule();
  q.mesh = &op.mesh();
  q.operands = {Layout::Of(matmul->operand(0)->type(), op.mesh()),
                Layout::Of(matmul->operand(1)->type(), op.mesh())};
  q.targets = {Layout::Of(matmul->operand(1)->type(), op.mesh())};  // [-, tp]
  q.available = std::move(available);
  q.sharing = std::move(sharing);
  q.pinned = std::move(pinned);
  return ChooseStrategy(q);
}

TEST(ChooseStrategy, ALayoutAnOperandIsAvailableInIsFree) {
  OneOp op(kProjection);
  ASSERT_TRUE(op.ok());
  // Alone: the weight is gathered, the result moved to its target.
  Choice alone = ChooseProjection(op, {}, {}, {});
  EXPECT_EQ(alone.operands[0].ToString(), "[tp, -]");
  EXPECT_EQ(alone.operands[1].ToString(), "[-, -]");
  // With %h gathered already (for an earlier projection): nothing to send.
  Choice reuse = ChooseProjection(op, {{Layout::Replicated(2)}, {}}, {}, {});
  EXPECT_EQ(reuse.operands[0].ToString(), "[-, -]");
  EXPECT_EQ(reuse.operands[1].ToString(), "[-, tp]");
  EXPECT_EQ(reuse.sources[0], 0);
  EXPECT_EQ(reuse.sources[1], -1);
  EXPECT_EQ(reuse.comm_cost, 0);
}

TEST(ChooseStrategy, AReshardSharedByLaterUsersCostsAShare) {
  OneOp op(kProjection);
  ASSERT_TRUE(op.ok());
  // Gathering %h for this and seven more projections of it beats gathering the weight.
  Choice shared = ChooseProjection(op, {}, {8, 1}, {});
  EXPECT_EQ(shared.operands[0].ToString(), "[-, -]");
  EXPECT_GT(shared.shared_discount, 0);
  Choice alone = ChooseProjection(op, {}, {1, 1}, {});
  EXPECT_EQ(alone.operands[0].ToString(), "[tp, -]");
  EXPECT_EQ(alone.shared_discount, 0);
}

TEST(ChooseStrategy, PinnedOperandsStayWhereTheyAre) {
  OneOp op(kProjection);
  ASSERT_TRUE(op.ok());
  Choice pinned = ChooseProjection(op, {}, {}, {false, true});
  EXPECT_EQ(pinned.operands[1].ToString(), "[-, tp]");
  EXPECT_EQ(pinned.pinned_moves, 0);
  EXPECT_EQ(pinned.operands[0].ToString(), "[-, -]");
}

TEST(SharingUsers, CountsLaterUsersOfTheSameKindAndPosition) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
func @f(%h: f32[4, 4], %a: f32[4, 4], %b: f32[4, 4]) -> f32[4, 4] {
  %q = matmul(%h, %a)
  %k = matmul(%h, %b)
  %v = matmul(%a, %h)
  %s = add(%h, %k)
  return %s
}
)");
  ASSERT_NE(m, nullptr);
  std::vector<Operation*> ops;
  for (Operation* op : *m->functions()[0]->body()) {
    if (!op->Is(OpKind::kReturn)) ops.push_back(op);
  }
  std::vector<std::vector<int>> sharing = SharingUsers(ops);
  ASSERT_EQ(sharing.size(), 4u);
  EXPECT_EQ(sharing[0], (std::vector<int>{2, 1}));  // %k reads %h at position 0 too
  EXPECT_EQ(sharing[1], (std::vector<int>{1, 1}));
  EXPECT_EQ(sharing[2], (std::vector<int>{1, 1}));  // %h at position 1: alone
  EXPECT_EQ(sharing[3], (std::vector<int>{1, 1}));
}

// A gradient function reads each weight twice at the same position: the forward's
// matmul(x, W) and the backward's dX = matmul(dY, W){transpose_b}. They need different
// layouts of W, so neither is counted as sharing the other's reshard (counted, the
// forward's row-parallel GEMM saw gathering W_o at half price and chose it over the
// reduce_scatter).
TEST(SharingUsers, AMatmulReadingTheOperandTransposedDoesNotShare) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
func @f(%x: f32[4, 4], %w: f32[4, 4], %dy: f32[4, 4]) -> f32[4, 4] {
  %y = matmul(%x, %w)
  %dx = matmul(%dy, %w) {transpose_b}
  %z = matmul(%dy, %w)
  %s = add(%dx, %z)
  return %s
}
)");
  ASSERT_NE(m, nullptr);
  std::vector<Operation*> ops;
  for (Operation* op : *m->functions()[0]->body()) {
    if (!op->Is(OpKind::kReturn)) ops.push_back(op);
  }
  std::vector<std::vector<int>> sharing = SharingUsers(ops);
  ASSERT_EQ(sharing.size(), 4u);
  EXPECT_EQ(sharing[0], (std::vector<int>{1, 2}));  // %z reads %w as %y does, not %dx
  // %z reads %dy at position 0 too, but untransposed: counted apart (conservative).
  EXPECT_EQ(sharing[1], (std::vector<int>{1, 1}));
  EXPECT_EQ(sharing[2], (std::vector<int>{1, 1}));
}

// ---- Layout ops --------------------------------------------------------------------

TEST(ReshapeRule, SplittingASplitDimKeepsTheSplitOnItsMajorPart) {
  OneOp op(F("tp=4", "%x: f32[256, 256@tp]", "%r = reshape(%x) : f32[256, 8@tp, 32]",
             "f32[256, 8, 32]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p256, p8*p32] -> [p256, p8, p32]");
  EXPECT_EQ(op.Lowered(), "[-, tp] -> [-, tp, -]");
}

TEST(ReshapeRule, MergingKeepsTheSplitOnlyOnTheMajorDim) {
  OneOp major(F("tp=4", "%x: f32[8@tp, 4]", "%r = reshape(%x) : f32[32]", "f32[32]"));
  EXPECT_EQ(major.Factors(), "[p8, p4] -> [p8*p4]");
  EXPECT_EQ(major.Forward(), "[tp, -] -> [tp]");
  // The minor dim's split cannot survive the merge: the operand is gathered.
  OneOp minor(F("tp=4", "%x: f32[8, 4@tp]", "%r = reshape(%x) : f32[32]", "f32[32]"));
  Choice c = minor.Choose(false);
  EXPECT_EQ(c.operands[0].ToString(), "[-, -]");
  // A major dim split down to size 1 lets the minor one split too.
  OneOp both(F("dp=2, tp=2", "%x: f32[2@dp, 4@tp]", "%r = reshape(%x) : f32[8]", "f32[8]"));
  EXPECT_EQ(both.Forward(), "[dp, tp] -> [(dp, tp)]");
}

TEST(ReshapeRule, DimsThatDoNotFactorAreReplicated) {
  OneOp op(F("tp=2", "%x: f32[6@tp, 4]", "%r = reshape(%x) : f32[4, 6]", "f32[4, 6]"));
  ASSERT_TRUE(op.ok());
  // 6 x 4 -> 4 x 6: a common factor 2, then a stretch of 3 x 4 vs 2 x 6 that does not
  // factor.
  EXPECT_EQ(op.Factors(), "[p2*rep3, rep4] -> [p2*rep2, rep6]");
  EXPECT_EQ(op.Forward(), "[tp, -] -> [tp, -]");
  OneOp ones(F("tp=2", "%x: f32[4@tp]", "%r = reshape(%x) : f32[1, 4, 1]", "f32[1, 4, 1]"));
  EXPECT_EQ(ones.Factors(), "[p4] -> [_, p4, _]");
  EXPECT_EQ(ones.Forward(), "[tp] -> [-, tp, -]");
}

TEST(TransposeRule, PermutesTheLayout) {
  OneOp op(F("dp=2, tp=2", "%x: f32[4@dp, 6, 8@tp]", "%r = transpose(%x) {perm = [2, 0, 1]}",
             "f32[8, 4, 6]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p4, p6, p8] -> [p8, p4, p6]");
  EXPECT_EQ(op.Forward(), "[dp, -, tp] -> [tp, dp, -]");
}

TEST(SliceRule, SlicedDimsAreReplicatedFullDimsKeepTheirSplit) {
  OneOp op(F("dp=2, tp=2", "%x: f32[8@dp, 8@tp]",
             "%r = slice(%x) {start = [0, 2], size = [8, 4]}", "f32[8, 4]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p8, rep8] -> [p8, rep4]");
  EXPECT_EQ(op.Forward(), "[dp, -] -> [dp, -]");
}

TEST(ConcatRule, TheConcatenatedDimIsReplicated) {
  OneOp op(F("dp=2, tp=2", "%x: f32[8@dp, 4@tp], %y: f32[8, 2]", "%r = concat(%x, %y) {dim = 1}",
             "f32[8, 6]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p8, rep4] [p8, rep2] -> [p8, rep6]");
  EXPECT_EQ(op.Forward(), "[dp, -] [dp, -] -> [dp, -]");
}

TEST(BroadcastRule, NewDimsSplitFreely) {
  OneOp op(F("dp=2, tp=2", "%x: f32[8@tp]", "%r = broadcast(%x) : f32[4@dp, 8@tp]", "f32[4, 8]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p8] -> [p4, p8]");
  EXPECT_EQ(op.Lowered(), "[tp] -> [dp, tp]");
}

TEST(FullRule, AnyLayoutIsLocal) {
  OneOp op(F("tp=2", "", "%r = full() {value = 1.0} : f32[4@tp, 2]", "f32[4, 2]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Lowered(), " -> [tp, -]");
}

TEST(ReshardRule, IsTheIdentityOnLayouts) {
  OneOp op(F("tp=2", "%x: f32[4@tp, 2]", "%r = reshard(%x) : f32[4, 2@tp]", "f32[4, 2]"));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op.Factors(), "[p4, p2] -> [p4, p2]");
  // Moving the split before or after costs the same: the first candidate (from the
  // operand) wins, and the all_to_all happens on the result.
  EXPECT_EQ(op.Lowered(), "[tp, -] -> [tp, -]");
}

// ---- Legalization --------------------------------------------------------------------

TEST(Legalize, DropsReusedAxesIndivisibleSplitsAndSplitsOfReplicatedFactors) {
  OpRule rule;
  int a = rule.AddFactor(8, FactorKind::kPass);
  int b = rule.AddFactor(6, FactorKind::kPass);
  int c = rule.AddFactor(8, FactorKind::kReplicate);
  rule.operands.push_back({true, {{a}, {b}, {c}}});
  rule.results.push_back({true, {{a}, {b}, {c}}});
  Mesh mesh("m", {{"dp", 2, {}}, {"tp", 4, {}}});
  Strategy s;
  s.factors = {{"tp", "dp"}, {"dp"}, {"dp"}};
  Legalize(rule, mesh, s);
  EXPECT_EQ(s.factors, (std::vector<AxisList>{{"tp", "dp"}, {}, {}}));
  s.factors = {{}, {"tp"}, {}};
  Legalize(rule, mesh, s);  // 6 % 4 != 0
  EXPECT_EQ(s.factors, (std::vector<AxisList>{{}, {}, {}}));
}

TEST(Legalize, KeepsMultiFactorDimsContiguous) {
  OpRule rule;
  int major = rule.AddFactor(4, FactorKind::kPass);
  int minor = rule.AddFactor(8, FactorKind::kPass);
  rule.operands.push_back({true, {{major, minor}}});
  rule.results.push_back({true, {{major}, {minor}}});
  Mesh mesh("m", {{"dp", 2, {}}, {"tp", 4, {}}});
  Strategy s;
  s.factors = {{"dp"}, {"tp"}};  // major split to 2 of 4: the minor cannot split
  Legalize(rule, mesh, s);
  EXPECT_EQ(s.factors, (std::vector<AxisList>{{"dp"}, {}}));
  s.factors = {{"tp"}, {"dp"}};  // major split down to 1: fine
  Legalize(rule, mesh, s);
  EXPECT_EQ(s.factors, (std::vector<AxisList>{{"tp"}, {"dp"}}));
}

TEST(Legalize, PartialOnlyWhereTheOpPassesItThrough) {
  OpRule rule;
  int a = rule.AddFactor(8, FactorKind::kPass);
  rule.operands.push_back({true, {{a}}});
  rule.results.push_back({true, {{a}}});
  Mesh mesh("m", {{"tp", 2, {}}});
  Strategy s;
  s.factors = {{"tp"}};
  s.partial = {"tp"};
  rule.partial_mode = PartialMode::kNone;
  Legalize(rule, mesh, s);
  EXPECT_TRUE(s.partial.empty());
  rule.partial_mode = PartialMode::kFirst;
  s.partial = {"tp"};
  Legalize(rule, mesh, s);  // the partial keeps tp, the factor gives it up
  EXPECT_EQ(s.partial, AxisList{"tp"});
  EXPECT_TRUE(s.factors[0].empty());
  EXPECT_EQ(s.partial_operand, 0);
}

TEST(RuleFor, SpmdOnlyOpsHaveNoRule) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
spmd func @f(%x: f32[4]) -> f32[8] {
  %r = all_gather(%x) {axis = tp, dim = 0} : f32[8]
  return %r
})");
  ASSERT_NE(m, nullptr);
  absl::StatusOr<OpRule> rule = RuleFor(*m->functions()[0]->body()->front());
  EXPECT_FALSE(rule.ok());
}

// ---- Weighing and explaining the candidates ------------------------------------------

TEST(WeighStrategies, ChooseStrategyReturnsTheChosenCandidate) {
  OneOp big(F("tp=4", "%x: f32[1024, 4096@tp]", "%r = softmax(%x) {dim = 1}", "f32[1024, 4096]"));
  ASSERT_TRUE(big.ok());
  WeighedStrategies weighed = WeighStrategies(big.Query(false));
  // From %x's layout, replicated, and the first with its statistics gathered (which is
  // the replicated strategy again, so it is dropped as a duplicate).
  ASSERT_EQ(weighed.candidates.size(), 2u);
  EXPECT_EQ(weighed.candidates[0].origin, CandidateOrigin::kOperand);
  EXPECT_EQ(weighed.candidates[0].origin_index, 0);
  EXPECT_EQ(weighed.candidates[1].origin, CandidateOrigin::kReplicated);
  EXPECT_EQ(weighed.chosen, 0u);
  Choice chosen = big.Choose(false);
  EXPECT_EQ(chosen.strategy, weighed.candidates[weighed.chosen].strategy);
  EXPECT_DOUBLE_EQ(chosen.comm_cost, weighed.candidates[weighed.chosen].comm_cost);
  for (const Choice& c : weighed.candidates) EXPECT_FALSE(CheaperChoice(c, chosen));

  OneOp small(F("tp=4", "%x: f32[8, 64@tp]", "%r = softmax(%x) {dim = 1}", "f32[8, 64]"));
  ASSERT_TRUE(small.ok());
  WeighedStrategies gathered = WeighStrategies(small.Query(false));
  EXPECT_EQ(gathered.candidates[gathered.chosen].origin, CandidateOrigin::kReplicated);
  EXPECT_EQ(WhyChosen(gathered), "least communication plus compute");
}

Choice Costing(double comm, double work) {
  Choice c;
  c.comm_cost = comm;
  c.work = work;
  return c;
}

TEST(WhyChosen, NamesTheCriterionThatDecided) {
  WeighedStrategies one;
  one.candidates = {Costing(5, 5)};
  EXPECT_EQ(WhyChosen(one), "the only candidate");
  WeighedStrategies comm;
  comm.candidates = {Costing(9, 1), Costing(3, 9), Costing(4, 1)};
  comm.chosen = 1;
  EXPECT_EQ(WhyChosen(comm), "least communication plus compute");
  WeighedStrategies work;
  // Equal within the relative tolerance of 1e-9.
  work.candidates = {Costing(1e12, 9), Costing(1e12 + 1, 3), Costing(5e12, 1)};
  work.chosen = 1;
  EXPECT_EQ(WhyChosen(work),
            "least work among 2 candidates of equal communication plus compute");
  WeighedStrategies order;
  order.candidates = {Costing(2, 3), Costing(2, 3), Costing(2, 4)};
  EXPECT_EQ(WhyChosen(order),
            "first in candidate order among 2 candidates of equal (comm + compute, work)");
  // Communication and compute add: less compute outweighs more communication.
  WeighedStrategies sum;
  sum.candidates = {Costing(3, 1), Costing(4, 1)};
  sum.candidates[0].compute_cost = 5;  // 8 in all
  sum.candidates[1].compute_cost = 1;  // 5 in all
  sum.chosen = 1;
  EXPECT_EQ(WhyChosen(sum), "least communication plus compute");
  EXPECT_TRUE(CheaperChoice(sum.candidates[1], sum.candidates[0]));
}

TEST(ExplainStrategyChoice, ListsEveryCandidateAndNamesTheWinner) {
  // x is split over rows; the target wants the result split over columns. Computing by
  // rows and moving the result (one all_to_all of 64 bytes) ties with gathering x (one
  // all_gather of 64 bytes) in bytes, collectives and work: the earlier candidate wins.
  // Replication gathers x as well but does all the work (twice the compute: 2 x 8 x 4 x 8
  // f32 FLOPs, memory-bound at 3.35 TB/s on its 512 bytes, in bytes at 360 GB/s: 55).
  OneOp op(F("tp=2", "%x: f32[8@tp, 4], %w: f32[4, 8]", "%r = matmul(%x, %w) : f32[8, 8@tp]",
             "f32[8, 8@tp]"));
  ASSERT_TRUE(op.ok());
  StrategyQuery query = op.Query(/*with_targets=*/true);
  WeighedStrategies weighed = WeighStrategies(query);
  EXPECT_EQ(ExplainStrategyChoice(query, weighed, "f"),
            "strategy of %r = matmul(%x, %w) in @f: 3 candidates, cheapest by (comm + compute, "
            "work), ties to the earlier; comm = bytes per device + 1048576 per collective, compute "
            "= its time in bytes at the link rate\n"
            "  operands now: %x [tp, -], %w [-, -]; result targets: [-, tp]\n"
            "  candidate 1, from %x's layout: needs %x [tp, -], %w [-, -]; gives [tp, -]; "
            "comm 1048640, compute 28, work 80  <- chosen\n"
            "  candidate 2, from the result targets: needs %x [-, -], %w [-, tp]; gives [-, tp]; "
            "comm 1048640, compute 28, work 80\n"
            "  candidate 3, replicated: needs %x [-, -], %w [-, -]; gives [-, -]; comm 1048640, "
            "compute 55, work 128\n"
            "  chosen: candidate 1 (first in candidate order among 2 candidates of equal (comm + "
            "compute, work))");
  EXPECT_EQ(op.Choose(true).strategy, weighed.candidates[0].strategy);
}

}  // namespace
}  // namespace commir::sharding
