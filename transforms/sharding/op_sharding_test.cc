#include "transforms/sharding/op_sharding.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commir/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/sharding/rule_builders.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;

TEST(ShardingTable, EveryOpOfGlobalFunctionsHasAnEntry) {
  absl::Status complete = CheckShardingTable(ExplicitShardingTable());
  EXPECT_TRUE(complete.ok()) << complete;
  for (const OpDef* def : AllOpDefs()) {
    // (A call needs no rule: propagation and partitioning inline calls first.)
    bool global = !def->Has(kSpmdOnly) && !def->Has(kTerminator) && def->kind != OpKind::kCall;
    EXPECT_EQ(ShardingOf(def->kind) != nullptr, global) << def->name;
  }
}

TEST(ShardingTable, AMissingEntryIsReportedNamingTheOp) {
  ShardingTable table = ExplicitShardingTable();
  table.erase(OpKind::kSoftmax);
  table.erase(OpKind::kConcat);
  absl::Status complete = CheckShardingTable(table);
  EXPECT_FALSE(complete.ok());
  EXPECT_THAT(complete.message(), HasSubstr("'concat'"));
  EXPECT_THAT(complete.message(), HasSubstr("'softmax'"));
  EXPECT_THAT(complete.message(), ::testing::Not(HasSubstr("'matmul'")));
}

TEST(ShardingTable, ElementwiseOpsTakeTheirRuleFromTheTrait) {
  for (const OpDef* def : AllOpDefs()) {
    if (!def->Has(kElementwise)) continue;
    EXPECT_FALSE(ExplicitShardingTable().contains(def->kind))
        << def->name << " is elementwise: its rule follows from the trait";
    if (def->Has(kSpmdOnly)) continue;
    const OpSharding* sharding = ShardingOf(def->kind);
    ASSERT_NE(sharding, nullptr) << def->name;
    EXPECT_EQ(sharding->rule, &ElementwiseRule) << def->name;
    EXPECT_EQ(sharding->decompose, nullptr) << def->name;
  }
}

// One global op `%r` per op whose decomposition combines statistics, on a mesh with a
// `tp` axis; operand 0 is split along its statistics factor below.
const std::map<OpKind, std::string>& StatsSamples() {
  static const auto* samples = new std::map<OpKind, std::string>{
      {OpKind::kSoftmax, R"(mesh @m(tp=4)
func @f(%x: f32[8, 64]) -> f32[8, 64] {
  %r = softmax(%x) {dim = 1}
  return %r
}
)"},
      {OpKind::kLayerNorm, R"(mesh @m(tp=4)
func @f(%x: f16[8, 64], %w: f16[64], %b: f16[64]) -> f16[8, 64] {
  %r = layernorm(%x, %w, %b)
  return %r
}
)"},
      {OpKind::kRmsNorm, R"(mesh @m(tp=4)
func @f(%x: f32[8, 64], %w: f32[64]) -> f32[8, 64] {
  %r = rmsnorm(%x, %w)
  return %r
}
)"},
      {OpKind::kCrossEntropy, R"(mesh @m(tp=4)
func @f(%x: bf16[8, 64], %labels: i64[8]) -> f32[8] {
  %r, %lse = cross_entropy(%x, %labels) {reduction = none, label_smoothing = 0.1}
  return %lse
}
)"},
  };
  return *samples;
}

TEST(ShardingTable, EveryOpThatCostsStatisticsHasASample) {
  for (const auto& [kind, sharding] : ExplicitShardingTable()) {
    if (sharding.stats_all_reduces == 0) continue;
    EXPECT_TRUE(StatsSamples().contains(kind)) << GetOpDef(kind).name;
  }
}

// Lowers each sample with its statistics factor split over tp (the decomposition alone,
// into a fresh spmd function) and counts the all_reduces: what the cost model charges
// per split statistics factor must be what the lowering emits.
TEST(ShardingTable, DecompositionsEmitTheAllReducesTheyDeclare) {
  for (const auto& [kind, text] : StatsSamples()) {
    SCOPED_TRACE(std::string(GetOpDef(kind).name));
    std::unique_ptr<Module> module = testing::ParseForTest(text);
    ASSERT_NE(module, nullptr);
    Function* global = module->functions()[0];
    const Mesh& mesh = *global->mesh();
    Operation* op = global->body()->front();
    ASSERT_TRUE(op->Is(kind));
    absl::StatusOr<OpRule> rule = RuleFor(*op);
    ASSERT_TRUE(rule.ok()) << rule.status();
    const OpSharding& sharding = *ShardingOf(kind);
    EXPECT_EQ(rule->stats_all_reduces, sharding.stats_all_reduces);

    Choice choice;
    choice.strategy.factors.resize(rule->num_factors());
    int split = 0;
    for (int f = 0; f < rule->num_factors(); ++f) {
      if (rule->kinds[f] != FactorKind::kStats) continue;
      choice.strategy.factors[f] = {"tp"};
      ++split;
    }
    ASSERT_EQ(split, 1) << "a sample has one statistics factor";
    std::vector<Type> global_types, local_types;
    for (int i = 0; i < op->num_operands(); ++i) {
      choice.operands.push_back(RequiredOperandLayout(*rule, choice.strategy, i, mesh));
      global_types.push_back(op->operand(i)->type());
      local_types.push_back(LocalTypeOf(global_types.back(), choice.operands.back(), mesh));
    }
    for (int r = 0; r < op->num_results(); ++r) {
      choice.results.push_back(NaturalResultLayout(*rule, choice.strategy, r, mesh));
    }
    Function* local = AddFunction(*module, "local", /*spmd=*/true, &mesh, local_types, {});
    OpBuilder emitter(local, local->body(), nullptr);
    std::vector<OpBuilder::Operand> operands;
    for (int i = 0; i < local->body()->num_arguments(); ++i) {
      operands.push_back(local->body()->argument(i));
    }
    DecompositionInput input{emitter, *op, *rule, choice, operands, global_types};
    DecompositionResult results = sharding.decompose(input);
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_TRUE(results->has_value()) << "a split statistics factor needs the decomposition";
    ASSERT_EQ((*results)->size(), static_cast<size_t>(op->num_results()));
    for (int r = 0; r < op->num_results(); ++r) {
      EXPECT_EQ((**results)[r]->type(), LocalTypeOf(op->result(r)->type(), choice.results[r], mesh));
    }
    int all_reduces = 0;
    for (Operation* emitted : *local->body()) all_reduces += emitted->Is(OpKind::kAllReduce) ? 1 : 0;
    EXPECT_EQ(all_reduces, split * sharding.stats_all_reduces);
  }
}

// Unsplit statistics need no decomposition: the op runs on each device's rows.
TEST(ShardingTable, UnsplitStatisticsKeepTheOp) {
  std::unique_ptr<Module> module = testing::ParseForTest(StatsSamples().at(OpKind::kSoftmax));
  ASSERT_NE(module, nullptr);
  Function* global = module->functions()[0];
  Operation* op = global->body()->front();
  absl::StatusOr<OpRule> rule = RuleFor(*op);
  ASSERT_TRUE(rule.ok());
  Choice choice;
  choice.strategy.factors.resize(rule->num_factors());
  Type x = op->operand(0)->type();
  Function* local = AddFunction(*module, "local", true, global->mesh(), {x}, {});
  OpBuilder emitter(local, local->body(), nullptr);
  std::vector<OpBuilder::Operand> operands = {local->body()->argument(0)};
  std::vector<Type> global_types = {x};
  DecompositionInput input{emitter, *op, *rule, choice, operands, global_types};
  DecompositionResult results = ShardingOf(OpKind::kSoftmax)->decompose(input);
  ASSERT_TRUE(results.ok());
  EXPECT_FALSE(results->has_value());
  EXPECT_TRUE(local->body()->empty());
}

}  // namespace
}  // namespace commir::sharding
