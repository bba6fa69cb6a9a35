#include "transforms/schedules/attention_match.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace commir::schedules {
namespace {

// The all_gather along dim 2 that defines `value`, or null.
Operation* SequenceGather(const Value* value) {
  Operation* def = value->kind() == Value::Kind::kResult ? value->defining_op() : nullptr;
  if (def == nullptr || !def->Is(OpKind::kAllGather) || def->stream_operand() != nullptr) {
    return nullptr;
  }
  const Attribute* axis = def->attrs().Find("axis");
  if (axis == nullptr || def->attrs().GetInt("dim", -1) != 2) return nullptr;
  return def;
}

// Where the chosen axes sit in `gathered`: the split into (acting, rest), or a reason
// why the schedule cannot take them.
struct AxisSplit {
  AxisList acting, rest;
  std::string why_not;
};

AxisSplit SplitGatherAxes(const AxisList& gathered, const AxisList& chosen, GatherEnd end) {
  if (chosen.empty()) return {gathered, {}, ""};
  for (const std::string& axis : chosen) {
    if (std::find(gathered.begin(), gathered.end(), axis) == gathered.end()) {
      return {{}, {}, absl::StrFormat("k/v are not gathered over axis '%s'", axis)};
    }
  }
  const size_t n = chosen.size();
  const size_t first = end == GatherEnd::kLeading ? 0 : gathered.size() - n;
  AxisList acting(gathered.begin() + first, gathered.begin() + first + n);
  AxisList rest;
  for (const std::string& axis : gathered) {
    if (std::find(acting.begin(), acting.end(), axis) == acting.end()) rest.push_back(axis);
  }
  // The chosen axes, as a set, must be exactly that end of the gather's list.
  AxisList sorted_chosen = chosen, sorted_acting = acting;
  std::sort(sorted_chosen.begin(), sorted_chosen.end());
  std::sort(sorted_acting.begin(), sorted_acting.end());
  if (sorted_chosen != sorted_acting) {
    return {{}, {}, absl::StrFormat(
        "axes (%s) are not the %s axes of the sequence gather over (%s): the rest of the "
        "gather would hold strided sequence blocks",
        absl::StrJoin(chosen, ", "), end == GatherEnd::kLeading ? "leading" : "trailing",
        absl::StrJoin(gathered, ", "))};
  }
  return {acting, rest, ""};
}

// The single user of `value` when it is a summing reduce_scatter along the sequence
// (dim 2) over exactly `axes` on the main stream, else null.
Operation* SequenceScatter(const Value* value, const AxisList& axes) {
  if (value->users().size() != 1) return nullptr;
  Operation* user = value->users().front();
  if (!user->Is(OpKind::kReduceScatter) || user->stream_operand() != nullptr ||
      user->operand(0) != value || user->attrs().GetInt("dim", -1) != 2 ||
      GetOpDef(OpKind::kReduceScatter).EnumAttr(user->attrs(), "reduce") != "sum") {
    return nullptr;
  }
  const Attribute* axis = user->attrs().Find("axis");
  return axis != nullptr && axis->axes() == axes ? user : nullptr;
}

}  // namespace

std::vector<GatheredAttention> FindGatheredAttention(const Function& function,
                                                     const AxisList& chosen, GatherEnd end,
                                                     std::vector<std::string>* skipped) {
  std::vector<GatheredAttention> found;
  if (!function.is_spmd() || function.mesh() == nullptr) return found;
  const Mesh& mesh = *function.mesh();
  auto skip = [&](const Operation* op, const std::string& why) {
    if (skipped == nullptr) return;
    skipped->push_back(absl::StrFormat("@%s: %s at %d:%d: %s", function.name(),
                                       op->Is(OpKind::kAttentionGrad) ? "attention_grad" : "attention",
                                       op->loc().line, op->loc().col, why));
  };
  for (const std::string& axis : chosen) {
    if (!mesh.AxisIndex(axis).has_value()) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrFormat("@%s: mesh @%s has no axis '%s'", function.name(),
                                           mesh.name(), axis));
      }
      return found;
    }
  }
  // Post-order: the attentions in a loop body come before the loop, all in program order.
  WalkOps(function.body(), [&](Operation* op) {
    const bool grad = op->Is(OpKind::kAttentionGrad);
    if ((!op->Is(OpKind::kAttention) && !grad) || op->stream_operand() != nullptr) return;
    Operation* k = SequenceGather(op->operand(1));
    Operation* v = SequenceGather(op->operand(2));
    if (k == nullptr || v == nullptr) return;
    AxisList gathered = k->attrs().Find("axis")->axes();
    if (v->attrs().Find("axis")->axes() != gathered) return;
    Operation* dk_scatter = nullptr;
    Operation* dv_scatter = nullptr;
    if (grad) {
      // The schedules hand each device its own keys' gradient, which is what these
      // scatters give; other uses of the summed-over-queries dk/dv have no such form.
      dk_scatter = SequenceScatter(op->result(1), gathered);
      dv_scatter = SequenceScatter(op->result(2), gathered);
      if (dk_scatter == nullptr || dv_scatter == nullptr) {
        skip(op, absl::StrFormat("dk and dv are not each reduce-scattered along the sequence "
                                 "over (%s)", absl::StrJoin(gathered, ", ")));
        return;
      }
    }
    AxisSplit split = SplitGatherAxes(gathered, chosen, end);
    if (!split.why_not.empty()) {
      skip(op, split.why_not);
      return;
    }
    int64_t n = mesh.GroupSize(split.acting);
    if (n < 2) {
      skip(op, absl::StrFormat("axes (%s) have one device", absl::StrJoin(split.acting, ", ")));
      return;
    }
    found.push_back({op, k, v, split.acting, n, split.rest, mesh.GroupSize(split.rest), dk_scatter,
                     dv_scatter});
  });
  return found;
}

absl::StatusOr<AxisList> ParseScheduleAxes(const Module& module, const std::string& text,
                                           const std::string& pass) {
  AxisList axes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string axis(absl::StripAsciiWhitespace(part));
    bool known = false;
    for (const Mesh* mesh : module.meshes()) known = known || mesh->AxisIndex(axis).has_value();
    if (!known) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: unknown axis '%s' in axes=\"%s\": no mesh of the module has it", pass, axis, text));
    }
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: axis '%s' named twice in axes=\"%s\"", pass, axis, text));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

Value* FindOrMakeTopLevelRank(OpBuilder& e, Operation* attention, const AxisList& axes) {
  Function& function = *e.function();
  Operation* anchor = attention;
  while (anchor->parent_block() != function.body()) anchor = anchor->parent_block()->parent_op();
  for (Operation* op : *function.body()) {
    if (op == anchor) break;
    if (op->Is(OpKind::kRank) && op->stream_operand() == nullptr && op->attrs().size() == 1 &&
        op->attrs().Find("axis")->axes() == axes) {
      return op->result(0);
    }
  }
  OpBuilder top(&function, function.body(), anchor, e.loc());
  Value* rank = top.Op(OpKind::kRank, {}, sharding::AxisAttrs(axes), std::nullopt, "rank");
  if (!top.ok()) e.Fail(top.status());
  return rank;
}

void EraseWithDeadProducers(absl::Span<Operation* const> ops) {
  // Producers die when every use of their results is by an op that dies: count the
  // uses left per producer as the dead ops are found, so only the ops that die (and
  // their operands) are visited, not everything `ops` depend on; then erase them in
  // one batch (one Erase() per op would search the user list of %k or %v each time).
  std::vector<Operation*> dead(ops.begin(), ops.end());
  // An op of `ops` may also be a producer of another dead op (a rewritten attention read
  // only by the chunks of an exchange that dies with it): it is erased once.
  absl::flat_hash_set<Operation*> given(ops.begin(), ops.end());
  absl::flat_hash_map<Operation*, int64_t> uses_left;
  for (size_t i = 0; i < dead.size(); ++i) {
    for (Value* operand : dead[i]->all_operands()) {
      if (operand->kind() != Value::Kind::kResult) continue;
      Operation* producer = operand->defining_op();
      if (producer->num_regions() != 0) continue;
      auto [it, first] = uses_left.try_emplace(producer, 0);
      if (first) {
        for (int r = 0; r < producer->num_results(); ++r) {
          it->second += static_cast<int64_t>(producer->result(r)->users().size());
        }
      }
      if (--it->second == 0 && !given.contains(producer)) dead.push_back(producer);
    }
  }
  Operation::EraseAll(dead);
}

std::optional<Operand> QueryBase(const Value* q_pos, const AxisList& axes, int64_t local_queries) {
  auto def_of = [](const Value* v) -> const Operation* {
    return v != nullptr && v->kind() == Value::Kind::kResult ? v->defining_op() : nullptr;
  };
  // rank(axes) * local_queries, or rank(axes) alone when there is one query per device.
  auto is_offset = [&](const Value* v) {
    const Operation* op = def_of(v);
    if (op == nullptr) return false;
    auto is_rank = [&](const Value* r) {
      const Operation* rank = def_of(r);
      return rank != nullptr && rank->Is(OpKind::kRank) && rank->attrs().Find("axis") != nullptr &&
             rank->attrs().Find("axis")->axes() == axes;
    };
    if (local_queries == 1 && is_rank(v)) return true;
    if (!op->Is(OpKind::kMul) || op->num_operands() != 2) return false;
    for (int i = 0; i < 2; ++i) {
      const Value* other = op->operand(1 - i);
      if (is_rank(op->operand(i)) && other->is_literal() &&
          other->literal_value() == static_cast<double>(local_queries)) {
        return true;
      }
    }
    return false;
  };
  if (is_offset(q_pos)) return IndexLiteral(0);
  const Operation* op = def_of(q_pos);
  if (op == nullptr || !op->Is(OpKind::kAdd) || op->num_operands() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (!is_offset(op->operand(i))) continue;
    Value* base = op->operand(1 - i);
    if (base->is_literal()) return IndexLiteral(static_cast<int64_t>(base->literal_value()));
    const Operation* base_def = def_of(base);
    if (base_def != nullptr && base_def->Is(OpKind::kFull)) return Operand(base);
  }
  return std::nullopt;
}

AttrDict CollectiveAttrs(const AxisList& axes, int64_t stream) {
  AttrDict attrs = sharding::AxisAttrs(axes);
  if (stream != 0) attrs.Set("stream", Attribute::Int(stream));
  return attrs;
}

AttrDict SliceAttrs(const std::vector<int64_t>& start, const std::vector<int64_t>& size) {
  AttrDict attrs;
  attrs.Set("start", Attribute::IntList(start));
  attrs.Set("size", Attribute::IntList(size));
  return attrs;
}

AttrDict DimAttrs(int64_t dim) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(dim));
  return attrs;
}

}  // namespace commir::schedules
