#include "transforms/schedules/ulysses_attention.h"

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/attention_op.h"
#include "commir/status_macros.h"
#include "transforms/schedules/attention_match.h"

namespace commir::schedules {
namespace {

constexpr int64_t kCommStream = 1;

AttrDict AllToAllAttrs(const AxisList& axes, int64_t split_dim, int64_t concat_dim) {
  AttrDict attrs = CollectiveAttrs(axes, kCommStream);
  attrs.Set("split_dim", Attribute::Int(split_dim));
  attrs.Set("concat_dim", Attribute::Int(concat_dim));
  return attrs;
}

// Repeats each of x's heads (dim 1) `times` times in place: [B, Hkv, S, D] ->
// [B, Hkv * times, S, D] with head c*times + t a copy of head c.
Value* RepeatHeads(OpBuilder& e, Value* x, int64_t times, const std::string& name) {
  if (times == 1) return x;
  std::vector<int64_t> d = x->type().dims();
  Type expanded = x->type().WithDims({d[0], d[1], 1, d[2], d[3]});
  Type repeated = x->type().WithDims({d[0], d[1], times, d[2], d[3]});
  Type merged = x->type().WithDims({d[0], d[1] * times, d[2], d[3]});
  Value* e1 = e.Op(OpKind::kReshape, {x}, {}, expanded);
  Value* e2 = e.Op(OpKind::kBroadcast, {e1}, {}, repeated);
  return e.Op(OpKind::kReshape, {e2}, {}, merged, name);
}

// `x` in the head split over `axes`: all_to_all {split_dim = 1, concat_dim = 2}, or, when
// `x` is itself the sequence-split result of such a head split (the forward's o and lse
// coming back from a Ulysses attention), that head-split value: the two exchanges are
// inverses and cost nothing.
Value* ToHeads(OpBuilder& e, Value* x, const AxisList& axes, const std::string& name) {
  Operation* def = x->kind() == Value::Kind::kResult ? x->defining_op() : nullptr;
  if (def != nullptr && def->Is(OpKind::kAllToAll) && def->attrs().GetInt("split_dim", -1) == 2 &&
      def->attrs().GetInt("concat_dim", -1) == 1 && def->attrs().Find("axis") != nullptr &&
      def->attrs().Find("axis")->axes() == axes) {
    return def->operand(0);
  }
  return e.Op(OpKind::kAllToAll, {x}, AllToAllAttrs(axes, 1, 2), std::nullopt, name);
}

// Sums dk or dv of the repeated kv heads back onto their kv head (RepeatHeads' adjoint):
// [B, Hkv * times, S, D] -> [B, Hkv, S, D].
Value* SumRepeatedHeads(OpBuilder& e, Value* x, int64_t times, const std::string& name) {
  if (times == 1) return x;
  std::vector<int64_t> d = x->type().dims();
  Value* split = e.Op(OpKind::kReshape, {x}, {},
                      x->type().WithDims({d[0], d[1] / times, times, d[2], d[3]}));
  AttrDict dims;
  dims.Set("dims", Attribute::IntList({2}));
  return e.Op(OpKind::kReduceSum, {split}, std::move(dims), std::nullopt, name);
}

// Appends the attention (or attention_grad, with its dk/dv scatters) to `rewritten` when
// it was rewritten (its results now unused), else why not to `skipped` (when given).
absl::Status Rewrite(Function& function, const GatheredAttention& match,
                     std::vector<Operation*>* rewritten, std::vector<std::string>* skipped) {
  Operation* attention = match.attention;
  const int64_t n = match.group_size;
  const bool grad = match.is_grad();
  // attention and attention_grad share q, k, v and the positions' meaning; the
  // backward's positions come after its o, lse and dout.
  const int position_index = grad ? static_cast<int>(AttentionGradOp::kQPos)
                                  : static_cast<int>(AttentionOp::kQPos);
  Value* q = attention->operand(0);
  Value* q_pos_in = attention->num_operands() > position_index ? attention->operand(position_index)
                                                               : nullptr;
  Value* k_pos_in = attention->num_operands() > position_index + 1
                        ? attention->operand(position_index + 1)
                        : nullptr;
  Value* k = match.k_gather->operand(0);
  Value* v = match.v_gather->operand(0);
  const int64_t heads = q->type().dims()[1];
  const int64_t kv_heads = k->type().dims()[1];
  const int64_t local_queries = q->type().dims()[2];
  const bool causal = attention->BoolAttr("causal");
  auto leave = [&](const std::string& why) {
    if (skipped != nullptr) {
      skipped->push_back(absl::StrFormat("@%s: %s at %d:%d: %s", function.name(),
                                         grad ? "attention_grad" : "attention",
                                         attention->loc().line, attention->loc().col, why));
    }
    return absl::OkStatus();
  };
  const int64_t kv_target = std::lcm(kv_heads, n);
  if (heads % n != 0 || heads % kv_target != 0) {
    return leave(absl::StrFormat("%d heads (%d kv heads) cannot be split over %d devices",
                                 heads, kv_heads, n));
  }
  std::optional<Operand> query_base;
  if (causal) {
    // lower-to-spmd places the queries by the rank over the whole gather.
    const AxisList& gathered = match.k_gather->attrs().Find("axis")->axes();
    if (q_pos_in != nullptr) query_base = QueryBase(q_pos_in, gathered, local_queries);
    if (!query_base.has_value()) {
      return leave(absl::StrFormat("causal q_pos is not base + rank(%s) * %d",
                                   absl::StrJoin(gathered, ", "), local_queries));
    }
  }

  OpBuilder e(&function, attention->parent_block(), attention, attention->loc());
  const int64_t repeat = kv_target / kv_heads;
  Value* k_rep = RepeatHeads(e, k, repeat, "k_rep");
  Value* v_rep = RepeatHeads(e, v, repeat, "v_rep");
  AttrDict to_heads = AllToAllAttrs(match.axes, 1, 2);
  Value* qh = e.Op(OpKind::kAllToAll, {q}, to_heads, std::nullopt, "q_heads");
  Value* kh = e.Op(OpKind::kAllToAll, {k_rep}, to_heads, std::nullopt, "k_heads");
  Value* vh = e.Op(OpKind::kAllToAll, {v_rep}, to_heads, std::nullopt, "v_heads");
  std::vector<Operand> operands = {qh, kh, vh};
  if (grad) {
    // The backward's per-query operands follow the queries to the head split (lse has
    // no head dim of its own: [B, H, S] splits dim 1 and concatenates dim 2 the same way).
    const AttentionGradOp view(*attention);
    operands.push_back(ToHeads(e, view.o(), match.axes, "o_heads"));
    operands.push_back(ToHeads(e, view.lse(), match.axes, "lse_heads"));
    operands.push_back(ToHeads(e, view.dout(), match.axes, "dout_heads"));
  }
  if (!match.rest.empty()) {
    // Axes left gathered: the devices of a rest group hold consecutive chunks of the
    // sequence now (the chunk of rank(rest)), so the rest gather makes the whole sequence
    // and the queries sit at base + rank(rest) * chunk, in the form QueryBase reads, so a
    // ring over the rest can take this attention next.
    AttrDict gather = sharding::AxisAttrs(match.rest);
    gather.Set("dim", Attribute::Int(2));
    operands[1] = e.Op(OpKind::kAllGather, {kh}, gather, std::nullopt, "k_rest");
    operands[2] = e.Op(OpKind::kAllGather, {vh}, gather, std::nullopt, "v_rest");
    if (causal) {
      Value* rest_rank = FindOrMakeTopLevelRank(e, attention, match.rest);
      Value* q_pos = e.Op(OpKind::kMul, {rest_rank, IndexLiteral(local_queries * n)});
      bool zero_base = query_base->value == nullptr && query_base->literal == 0;
      if (!zero_base) q_pos = e.Op(OpKind::kAdd, {q_pos, *query_base});
      q_pos->set_name("q_pos");
      operands.push_back(q_pos);
      if (k_pos_in != nullptr) operands.push_back(k_pos_in);
    }
  } else if (causal) {
    // The whole query sequence starts at the base; with the default k_pos and as many
    // queries as keys that is attention's own default (0), so no positions are needed.
    const int64_t queries = local_queries * n;
    const int64_t keys = k->type().dims()[2] * n;
    bool base_is_default = query_base->value == nullptr &&
                           query_base->literal == static_cast<double>(keys - queries);
    if (!base_is_default || k_pos_in != nullptr) {
      Value* q_pos = query_base->value;
      if (q_pos == nullptr) {
        q_pos = e.IndexConstant(static_cast<int64_t>(query_base->literal), "q_pos");
      }
      operands.push_back(q_pos);
      if (k_pos_in != nullptr) operands.push_back(k_pos_in);
    }
  }
  AttrDict attrs = attention->attrs();
  attrs.Erase("stream");
  const int results = attention->num_results();
  std::vector<Value*> local =
      grad ? e.Ops(OpKind::kAttentionGrad, operands, attrs, 3, {"dq_heads", "dk_heads", "dv_heads"})
           : e.Ops(OpKind::kAttention, operands, attrs, results, {"o_heads", "lse_heads"});
  std::vector<Value*> back;
  for (int r = 0; r < results; ++r) {
    Value* x = local[r];
    if (grad && r > 0) {
      if (!match.rest.empty()) {
        // dk/dv of the whole sequence from this device's chunk of queries: summed over the
        // rest group, each keeping its own chunk (the one its queries came as).
        AttrDict scatter = sharding::AxisAttrs(match.rest);
        scatter.Set("dim", Attribute::Int(2));
        x = e.Op(OpKind::kReduceScatter, {x}, std::move(scatter), std::nullopt,
                 r == 1 ? "dk_rest" : "dv_rest");
      }
    }
    int64_t seq_dim = 2;  // [B, H/n, S(, Dv)] -> [B, H, S/n(, Dv)]
    x = e.Op(OpKind::kAllToAll, {x}, AllToAllAttrs(match.axes, seq_dim, 1));
    if (grad && r > 0) x = SumRepeatedHeads(e, x, repeat, "");
    back.push_back(x);
  }
  if (!e.ok()) {
    return absl::InternalError(absl::StrCat("ulysses-attention: ", e.status().message()));
  }
  std::vector<Value*> replaced = attention->results();
  if (grad) {
    replaced[1] = match.dk_scatter->result(0);
    replaced[2] = match.dv_scatter->result(0);
  }
  for (int r = 0; r < results; ++r) {
    back[r]->set_name(replaced[r]->name());
    replaced[r]->ReplaceAllUsesWith(back[r]);
  }
  // Erased with their dead producers by the caller, with the other rewritten ones.
  rewritten->push_back(attention);
  if (grad) {
    rewritten->push_back(match.dk_scatter);
    rewritten->push_back(match.dv_scatter);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status UlyssesAttention(Module& module, const AxisList& axes,
                              std::vector<std::string>* skipped, int* rewritten_count) {
  for (Function* function : module.functions()) {
    std::vector<Operation*> rewritten;
    absl::Status status;
    for (const GatheredAttention& match :
         FindGatheredAttention(*function, axes, GatherEnd::kTrailing, skipped)) {
      status = Rewrite(*function, match, &rewritten, skipped);
      if (!status.ok()) break;
    }
    EraseWithDeadProducers(rewritten);
    if (rewritten_count != nullptr) *rewritten_count += static_cast<int>(rewritten.size());
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

const OptionSchema<UlyssesAttentionOptions>& UlyssesAttentionOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<UlyssesAttentionOptions>())
           .String("axes", &UlyssesAttentionOptions::axes,
                   "Mesh axes of the k/v gather to all_to_all over, e.g. sp or \"dp,sp\": the "
                   "trailing axes of the gather; the rest stay gathered (empty: every axis)");
  return *schema;
}

const PassInfo& UlyssesAttentionPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<UlyssesAttentionPass>(
      "ulysses-attention",
      "Replace all-gathered k/v of sequence-parallel attention by all_to_all to a head split "
      "and back"));
  return *info;
}

absl::Status UlyssesAttentionPass::Run(Module& module) {
  skipped_.clear();
  COMMIR_ASSIGN_OR_RETURN(AxisList axes, ParseScheduleAxes(module, options().axes, name()));
  int rewritten = 0;
  absl::Status status = UlyssesAttention(module, axes, &skipped_, &rewritten);
  ReportRewrites(rewritten, "Attention ops rewritten to all_to_all over heads",
                 skipped_.empty()
                     ? absl::StrCat("no attention with k/v all-gathered along the sequence ",
                                    InSpmdFunctions(module))
                     : absl::StrJoin(skipped_, "; "));
  return status;
}

}  // namespace commir::schedules
