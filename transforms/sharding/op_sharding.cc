#include "transforms/sharding/op_sharding.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/base/internal/raw_logging.h"
#include "transforms/sharding/gather_sharding.h"
#include "transforms/sharding/rule_builders.h"
#include "transforms/sharding/token_parallel_loss.h"
#include "transforms/sharding/vocab_parallel_loss.h"

namespace commir::sharding {
namespace {

ShardingTable BuildTable() {
  ShardingTable table;
  table[OpKind::kFull] = {.rule = FullRule};
  table[OpKind::kMatmul] = {.rule = MatmulRule};
  table[OpKind::kReduceSum] = {.rule = ReduceRule};
  table[OpKind::kReduceMax] = {.rule = ReduceRule};
  table[OpKind::kReduceMean] = {.rule = ReduceRule, .decompose = DecomposeMean};
  table[OpKind::kSoftmax] = {.rule = SoftmaxRule, .decompose = DecomposeSoftmax,
                             .stats_all_reduces = 2};  // row max, row sum of exps
  table[OpKind::kLayerNorm] = {.rule = NormRule, .decompose = DecomposeNorm,
                               .stats_all_reduces = 2};  // mean, variance
  table[OpKind::kRmsNorm] = {.rule = NormRule, .decompose = DecomposeNorm,
                             .stats_all_reduces = 1};  // mean square
  table[OpKind::kAttention] = {.rule = AttentionRule, .decompose = DecomposeAttention};
  table[OpKind::kAttentionGrad] = {.rule = AttentionGradRule, .decompose = DecomposeAttentionGrad};
  // Vocabulary parallelism: the max, the sum of exponentials and the (smoothed) target
  // logit of each token; the backward needs none. Split tokens of a reduced loss add
  // one all_reduce of each device's [sum, count] (token_parallel_loss.h).
  table[OpKind::kCrossEntropy] = {.rule = CrossEntropyRule,
                                  .decompose = DecomposeCrossEntropy,
                                  .stats_all_reduces = 3};
  table[OpKind::kCrossEntropyGrad] = {.rule = CrossEntropyGradRule,
                                      .decompose = DecomposeCrossEntropyGrad};
  table[OpKind::kAttentionMerge] = {.rule = AttentionMergeRule};
  table[OpKind::kReshape] = {.rule = ReshapeRule};
  table[OpKind::kTranspose] = {.rule = TransposeRule};
  table[OpKind::kSlice] = {.rule = SliceRule, .decompose = DecomposeSlice};
  table[OpKind::kConcat] = {.rule = ConcatRule};
  table[OpKind::kBroadcast] = {.rule = BroadcastRule};
  table[OpKind::kReshard] = {.rule = IdentityRule, .decompose = DecomposeReshard};
  // Elementwise: each dimension split freely; the decomposition gives each block its
  // offsets in the whole tensor.
  table[OpKind::kDropout] = {.rule = ElementwiseRule, .decompose = DecomposeDropout};
  table[OpKind::kGather] = {.rule = GatherRule, .decompose = DecomposeGather};
  table[OpKind::kScatterAdd] = {.rule = ScatterAddRule, .decompose = DecomposeScatterAdd};
  table[OpKind::kTopK] = {.rule = TopKRule};
  // Expert parallelism: each device routes its own token groups (moe_rule.cc).
  table[OpKind::kMoeDispatch] = {.rule = MoeRule, .decompose = DecomposeMoe};
  table[OpKind::kMoeCollect] = {.rule = MoeRule, .decompose = DecomposeMoe};
  return table;
}

const OpSharding& ElementwiseSharding() {
  static const OpSharding sharding = {.rule = ElementwiseRule};
  return sharding;
}

// A call needs none: propagation and partitioning inline calls first.
bool NeedsSharding(const OpDef& def) {
  return !def.Has(kSpmdOnly) && !def.Has(kTerminator) && def.kind != OpKind::kCall;
}

const OpSharding* Lookup(const ShardingTable& table, OpKind kind) {
  if (!NeedsSharding(GetOpDef(kind))) return nullptr;  // never in a global function
  auto it = table.find(kind);
  if (it != table.end()) return &it->second;
  if (GetOpDef(kind).Has(kElementwise)) return &ElementwiseSharding();
  return nullptr;
}

}  // namespace

absl::Status CheckShardingTable(const ShardingTable& table) {
  std::vector<std::string> missing;
  for (const OpDef* def : AllOpDefs()) {
    const OpSharding* sharding = Lookup(table, def->kind);
    if (NeedsSharding(*def) && (sharding == nullptr || sharding->rule == nullptr)) {
      missing.push_back(std::string(def->name));
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("the sharding table has no entry for '",
                                          absl::StrJoin(missing, "', '"), "'"));
}

const ShardingTable& ExplicitShardingTable() {
  static const ShardingTable* table = [] {
    auto* built = new ShardingTable(BuildTable());
    // An op added without a way to be sharded is a programming error: say which.
    if (absl::Status complete = CheckShardingTable(*built); !complete.ok()) {
      ABSL_RAW_LOG(FATAL, "%s", std::string(complete.message()).c_str());
    }
    return built;
  }();
  return *table;
}

const OpSharding* ShardingOf(OpKind kind) { return Lookup(ExplicitShardingTable(), kind); }

absl::StatusOr<OpRule> RuleFor(const Operation& op) {
  for (Value* result : op.results()) {
    if (result->type().is_null()) return absl::InvalidArgumentError("an op result has no type");
  }
  const OpSharding* sharding = ShardingOf(op.kind());
  // Elementwise index arithmetic (of spmd code) has no layouts to shard.
  bool index_math = op.def().Has(kElementwise) && !op.result(0)->type().is_tensor();
  if (sharding == nullptr || index_math) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", op.name(), "' has no sharding rule (it is not an op of global functions)"));
  }
  OpRule rule = sharding->rule(op);
  rule.stats_all_reduces = sharding->stats_all_reduces;
  return rule;
}

}  // namespace commir::sharding
