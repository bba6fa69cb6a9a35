#include "transforms/sharding/sum_scatter.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "commir/builder.h"
#include "commir/status_macros.h"

namespace commir::sharding {
namespace {

// The reduce_sum that is `a2a`'s only user and sums over its concat_dim but not its
// split_dim, with the dimension the split_dim becomes in the sum's result; else nullopt.
struct Fold {
  Operation* sum = nullptr;
  int64_t scatter_dim = 0;
};

std::optional<Fold> Match(Operation& a2a) {
  if (!a2a.Is(OpKind::kAllToAll) || a2a.stream_operand() != nullptr || a2a.attrs().Has("stream")) {
    return std::nullopt;
  }
  const std::vector<Operation*> users = a2a.result(0)->users();
  if (users.size() != 1) return std::nullopt;
  Operation* sum = users.front();
  if (!sum->Is(OpKind::kReduceSum) || sum->parent_block() != a2a.parent_block() ||
      sum->operand(0) != a2a.result(0) || sum->stream_operand() != nullptr ||
      sum->attrs().Has("stream")) {
    return std::nullopt;
  }
  const int64_t rank = a2a.result(0)->type().rank();
  auto normalized = [rank](int64_t d) { return d < 0 ? d + rank : d; };
  const int64_t split = normalized(a2a.attrs().GetInt("split_dim", -1));
  const int64_t concat = normalized(a2a.attrs().GetInt("concat_dim", -1));
  const Attribute* dims_attr = sum->attrs().Find("dims");
  if (dims_attr == nullptr || split == concat) return std::nullopt;
  std::optional<std::vector<int64_t>> dims = dims_attr->int_list();
  if (!dims) return std::nullopt;
  for (int64_t& d : *dims) d = normalized(d);
  auto summed = [&](int64_t d) { return std::find(dims->begin(), dims->end(), d) != dims->end(); };
  if (!summed(concat) || summed(split)) return std::nullopt;
  Fold fold{sum, split};
  if (!sum->attrs().GetBool("keepdim", false)) {
    fold.scatter_dim -=
        std::count_if(dims->begin(), dims->end(), [&](int64_t d) { return d < split; });
  }
  return fold;
}

void CollectMatches(Block& block, std::vector<std::pair<Operation*, Fold>>& out) {
  for (Operation* op : block) {
    for (int r = 0; r < op->num_regions(); ++r) CollectMatches(*op->region(r), out);
    if (std::optional<Fold> fold = Match(*op)) out.emplace_back(op, *fold);
  }
}

}  // namespace

absl::StatusOr<int> FoldAllToAllIntoSums(Function& function) {
  std::vector<std::pair<Operation*, Fold>> matches;
  CollectMatches(*function.body(), matches);
  std::vector<Operation*> replaced;
  for (auto& [a2a, fold] : matches) {
    Operation* sum = fold.sum;
    OpBuilder e(&function, sum->parent_block(), sum, sum->loc());
    COMMIR_ASSIGN_OR_RETURN(Value * local,
                            e.CreateValue(OpKind::kReduceSum, {a2a->operand(0)}, sum->attrs()));
    AttrDict attrs;
    attrs.Set("axis", *a2a->attrs().Find("axis"));
    attrs.Set("dim", Attribute::Int(fold.scatter_dim));
    COMMIR_ASSIGN_OR_RETURN(Value * scattered,
                            e.CreateValue(OpKind::kReduceScatter, {local}, attrs));
    if (scattered->type() != sum->result(0)->type()) {
      return absl::InternalError("folding an all_to_all into a sum changed the sum's type");
    }
    local->set_name(sum->result(0)->name().empty() ? "" : sum->result(0)->name() + "_local");
    scattered->set_name(sum->result(0)->name());
    sum->result(0)->ReplaceAllUsesWith(scattered);
    replaced.push_back(sum);
    replaced.push_back(a2a);
  }
  Operation::EraseAll(replaced);
  return static_cast<int>(matches.size());
}

}  // namespace commir::sharding
