#include "search/dim_classes.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "search/union_find.h"
#include "transforms/sharding/op_rules.h"

namespace commir::search {
namespace {

using sharding::FactorKind;
using sharding::OpRule;

struct NodeFacts {
  int64_t divisible_size = 0;  // gcd of the occurrences' sizes (0: none yet)
  bool splittable = false;     // some op may split it without resharding
};

class ClassFinder {
 public:
  explicit ClassFinder(const Function& function) : function_(function) {}

  absl::StatusOr<std::vector<DimClass>> Run() {
    Block& body = *function_.body();
    for (Operation* op : body) {
      if (op->def().Has(kTerminator)) {
        ret_ = op;
        continue;
      }
      absl::StatusOr<OpRule> rule = sharding::RuleFor(*op);
      if (!rule.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            op->loc().line, ":", op->loc().col, ": cannot search layouts of '", op->def().name,
            "': ", rule.status().message()));
      }
      AddOp(*op, *rule);
    }
    return Collect();
  }

 private:
  int ValueDimNode(const Value* value, int dim) {
    auto [it, inserted] = value_dims_.try_emplace(std::make_pair(value, dim), 0);
    if (inserted) {
      it->second = uf_.Add();
      facts_.push_back({value->type().dims()[dim], false});
    }
    return it->second;
  }

  void AddOccurrence(int factor_node, const OpRule& rule, int factor) {
    NodeFacts& f = facts_[factor_node];
    f.divisible_size = std::gcd(f.divisible_size, rule.sizes[factor]);
    f.splittable |= rule.kinds[factor] != FactorKind::kReplicate;
  }

  void Join(const Value* value, const sharding::TensorFactors& t, int base, const OpRule& rule) {
    if (!t.is_tensor || value->is_literal() || !value->type().is_tensor()) return;
    for (size_t d = 0; d < t.dims.size() && d < value->type().dims().size(); ++d) {
      if (t.dims[d].empty()) continue;  // broadcast: no index space of the op
      int major = t.dims[d].front();
      AddOccurrence(base + major, rule, major);
      uf_.Union(ValueDimNode(value, static_cast<int>(d)), base + major);
    }
  }

  void AddOp(const Operation& op, const OpRule& rule) {
    int base = uf_.size();
    for (int f = 0; f < rule.num_factors(); ++f) {
      uf_.Add();
      facts_.push_back({});
    }
    for (int i = 0; i < op.num_operands() && i < static_cast<int>(rule.operands.size()); ++i) {
      Join(op.operand(i), rule.operands[i], base, rule);
    }
    for (int r = 0; r < op.num_results() && r < static_cast<int>(rule.results.size()); ++r) {
      Join(op.result(r), rule.results[r], base, rule);
    }
    // Self-attention: the keys' sequence is the queries' (see the header).
    if (op.Is(OpKind::kAttention) && rule.operands.size() >= 2 &&
        rule.operands[0].dims.size() == 4 && rule.operands[1].dims.size() == 4) {
      int sq = rule.operands[0].dims[2].front();
      int skv = rule.operands[1].dims[2].front();
      if (rule.sizes[sq] == rule.sizes[skv]) uf_.Union(base + sq, base + skv);
    }
  }

  std::vector<DimClass> Collect() {
    // Facts per class root.
    absl::flat_hash_map<int, NodeFacts> roots;
    for (int n = 0; n < uf_.size(); ++n) {
      NodeFacts& r = roots[uf_.Find(n)];
      r.divisible_size = std::gcd(r.divisible_size, facts_[n].divisible_size);
      r.splittable |= facts_[n].splittable;
    }
    std::vector<DimClass> classes;
    absl::flat_hash_map<int, int> class_of_root;
    auto visit = [&](const Value* value, Type declared, SignatureDim where) {
      if (!value->type().is_tensor()) return;
      int node = ValueDimNode(value, where.dim);
      int root = uf_.Find(node);
      const NodeFacts& f = roots.contains(root) ? roots[root] : facts_[node];
      if (!f.splittable || f.divisible_size < 2) return;
      auto [it, inserted] = class_of_root.try_emplace(root, static_cast<int>(classes.size()));
      if (inserted) {
        DimClass c;
        c.name = SignatureDimName(function_, where);
        c.divisible_size = f.divisible_size;
        classes.push_back(std::move(c));
      }
      DimClass& c = classes[it->second];
      c.signature_dims.push_back(where);
      if (declared.is_tensor() && !declared.dim_axes()[where.dim].empty()) c.pinned = true;
    };
    Block& body = *function_.body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      const Value* arg = body.argument(i);
      if (!arg->type().is_tensor()) continue;
      for (int d = 0; d < arg->type().rank(); ++d) visit(arg, function_.arg_types()[i], {false, i, d});
    }
    if (ret_ != nullptr) {
      for (int r = 0; r < ret_->num_operands(); ++r) {
        const Value* v = ret_->operand(r);
        if (v->is_literal() || !v->type().is_tensor()) continue;
        for (int d = 0; d < v->type().rank(); ++d) visit(v, function_.result_types()[r], {true, r, d});
      }
    }
    return classes;
  }

  const Function& function_;
  UnionFind uf_;
  std::vector<NodeFacts> facts_;
  absl::flat_hash_map<std::pair<const Value*, int>, int> value_dims_;
  const Operation* ret_ = nullptr;
};

}  // namespace

std::string SignatureDimName(const Function& function, const SignatureDim& dim) {
  if (dim.is_result) return absl::StrCat("result", dim.index, ".", dim.dim);
  const std::string& name = function.body()->argument(dim.index)->name();
  return absl::StrCat(name.empty() ? absl::StrCat("arg", dim.index) : name, ".", dim.dim);
}

absl::StatusOr<std::vector<DimClass>> FindDimClasses(const Function& function) {
  if (function.is_spmd()) {
    return absl::InvalidArgumentError(
        absl::StrCat("@", function.name(), " is a spmd function; the search needs a global one"));
  }
  return ClassFinder(function).Run();
}

}  // namespace commir::search
