#include "transforms/sharding/op_rules.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "transforms/sharding/compute_cost.h"

namespace commir::sharding {
namespace {

bool Contains(const AxisList& axes, absl::string_view axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

}  // namespace

int OpRule::AddFactor(int64_t size, FactorKind kind) {
  sizes.push_back(size);
  kinds.push_back(kind);
  return static_cast<int>(sizes.size()) - 1;
}

// ---- Strategies -------------------------------------------------------------------

namespace {

// Every tensor of the rule: operands, then results.
template <typename Fn>
void ForEachTensor(const OpRule& rule, Fn&& fn) {
  for (const TensorFactors& t : rule.operands) {
    if (t.is_tensor) fn(t);
  }
  for (const TensorFactors& t : rule.results) {
    if (t.is_tensor) fn(t);
  }
}

AxisList DimAxes(const Strategy& s, const std::vector<int>& factors) {
  AxisList axes;
  for (int f : factors) axes.insert(axes.end(), s.factors[f].begin(), s.factors[f].end());
  return axes;
}

}  // namespace

void Legalize(const OpRule& rule, const Mesh& mesh, Strategy& s) {
  s.factors.resize(rule.num_factors());
  AxisList used;
  if (rule.partial_mode == PartialMode::kNone) s.partial.clear();
  AxisList partial;
  for (const std::string& axis : s.partial) {
    if (mesh.AxisIndex(axis) && !Contains(partial, axis)) partial.push_back(axis);
  }
  s.partial = InMeshOrder(partial, mesh);
  used = s.partial;
  for (int f = 0; f < rule.num_factors(); ++f) {
    AxisList& axes = s.factors[f];
    if (rule.kinds[f] == FactorKind::kReplicate) axes.clear();
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!mesh.AxisIndex(axes[i]) || Contains(used, axes[i])) {
        axes.resize(i);
        break;
      }
      used.push_back(axes[i]);
    }
    while (!axes.empty() && rule.sizes[f] % mesh.GroupSize(axes) != 0) axes.pop_back();
  }
  // Contiguity of multi-factor dimensions; clearing a factor can break another
  // dimension that lists it as a major factor, so repeat until stable.
  for (bool changed = true; changed;) {
    changed = false;
    ForEachTensor(rule, [&](const TensorFactors& t) {
      for (const std::vector<int>& dim : t.dims) {
        bool split_below = false;
        for (int f : dim) {
          if (split_below && !s.factors[f].empty()) {
            s.factors[f].clear();
            changed = true;
          }
          if (rule.sizes[f] / mesh.GroupSize(s.factors[f]) > 1) split_below = true;
        }
      }
    });
  }
  // Who carries the partial.
  if (s.partial.empty()) {
    s.partial_operand = -1;
    return;
  }
  switch (rule.partial_mode) {
    case PartialMode::kNone: break;
    case PartialMode::kAll: s.partial_operand = -1; return;
    case PartialMode::kFirst:
      if (!rule.operands.empty() && rule.operands[0].is_tensor) {
        s.partial_operand = 0;
        return;
      }
      break;
    case PartialMode::kAny:
      if (s.partial_operand >= 0 && s.partial_operand < static_cast<int>(rule.operands.size()) &&
          rule.operands[s.partial_operand].is_tensor) {
        return;
      }
      for (size_t i = 0; i < rule.operands.size(); ++i) {
        if (rule.operands[i].is_tensor) {
          s.partial_operand = static_cast<int>(i);
          return;
        }
      }
      break;
  }
  s.partial.clear();
  s.partial_operand = -1;
}

Layout RequiredOperandLayout(const OpRule& rule, const Strategy& s, int i, const Mesh& mesh) {
  Layout layout;
  const TensorFactors& t = rule.operands[i];
  if (!t.is_tensor) return layout;
  for (const std::vector<int>& dim : t.dims) layout.dims.push_back(DimAxes(s, dim));
  bool carries = rule.partial_mode == PartialMode::kAll || s.partial_operand == i;
  if (carries) layout.partial = s.partial;
  if (i == rule.added_once_operand) {
    AxisList partial = layout.partial;
    for (int f = 0; f < rule.num_factors(); ++f) {
      if (rule.kinds[f] != FactorKind::kSum) continue;
      bool in_operand = false;
      for (const std::vector<int>& dim : t.dims) {
        in_operand = in_operand || std::find(dim.begin(), dim.end(), f) != dim.end();
      }
      if (!in_operand) partial.insert(partial.end(), s.factors[f].begin(), s.factors[f].end());
    }
    if (partial.size() != layout.partial.size()) layout.partial = InMeshOrder(partial, mesh);
  }
  return layout;
}

Layout NaturalResultLayout(const OpRule& rule, const Strategy& s, int i, const Mesh& mesh) {
  Layout layout;
  const TensorFactors& t = rule.results[i];
  if (!t.is_tensor) return layout;
  for (const std::vector<int>& dim : t.dims) layout.dims.push_back(DimAxes(s, dim));
  AxisList partial = s.partial;
  AxisList max_partial;
  // A reducing factor makes partial only the results it is summed out of: attention_grad's
  // query sequence stays split in dq but is summed out of dk and dv.
  auto in_result = [&](int f) {
    for (const std::vector<int>& dim : t.dims) {
      if (std::find(dim.begin(), dim.end(), f) != dim.end()) return true;
    }
    return false;
  };
  for (int f = 0; f < rule.num_factors(); ++f) {
    if (in_result(f)) continue;
    if (rule.kinds[f] == FactorKind::kSum) {
      partial.insert(partial.end(), s.factors[f].begin(), s.factors[f].end());
    } else if (rule.kinds[f] == FactorKind::kMax) {
      max_partial.insert(max_partial.end(), s.factors[f].begin(), s.factors[f].end());
    }
  }
  if (!max_partial.empty()) {
    layout.partial = InMeshOrder(max_partial, mesh);
    layout.partial_kind = ReductionFn::kMax;
  } else {
    layout.partial = InMeshOrder(partial, mesh);
  }
  return layout;
}

void MergeLayout(const OpRule& rule, const TensorFactors& t, const Layout& layout, const Mesh& mesh,
                 Strategy& s) {
  s.factors.resize(rule.num_factors());
  if (!t.is_tensor || layout.dims.size() != t.dims.size()) return;
  AxisList used = s.partial;
  for (const AxisList& axes : s.factors) used.insert(used.end(), axes.begin(), axes.end());
  for (size_t d = 0; d < t.dims.size(); ++d) {
    const AxisList& axes = layout.dims[d];
    size_t next = 0;
    for (int f : t.dims[d]) {
      if (next == axes.size()) break;
      AxisList take;
      int64_t product = 1;
      while (next < axes.size() && mesh.AxisIndex(axes[next]) &&
             rule.sizes[f] % (product * mesh.GroupSize({axes[next]})) == 0) {
        product *= mesh.GroupSize({axes[next]});
        take.push_back(axes[next++]);
      }
      bool free = std::none_of(take.begin(), take.end(),
                               [&](const std::string& a) { return Contains(used, a); });
      if (!take.empty() && free && s.factors[f].empty() && rule.kinds[f] != FactorKind::kReplicate) {
        s.factors[f] = take;
        used.insert(used.end(), take.begin(), take.end());
      }
      // Later factors of this dimension get axes only if this one is split to size 1.
      if (product != rule.sizes[f]) break;
    }
  }
}

double StatsBytes(Type global, const OpRule& rule, const Strategy& s, const Mesh& mesh) {
  double bytes = 0;
  if (rule.stats_all_reduces == 0 || rule.operands.empty()) return 0;
  const TensorFactors& x = rule.operands[0];
  Layout layout = RequiredOperandLayout(rule, s, 0, mesh);
  for (size_t d = 0; d < x.dims.size(); ++d) {
    for (int f : x.dims[d]) {
      if (rule.kinds[f] != FactorKind::kStats || s.factors[f].empty()) continue;
      std::vector<int64_t> dims = LocalDims(global.dims(), layout, mesh);
      dims[d] = 1;
      ElementType et = global.element_type() == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
      Type stats = Type::Tensor(et, dims);
      AttrDict attrs = AxisAttrs(s.factors[f]);
      Type types[] = {stats};
      OpSignature sig{types, attrs, {}, 1, &mesh, true};
      bytes += rule.stats_all_reduces *
               (CollectiveByteWeight(mesh, s.factors[f]) *
                    GetOpDef(OpKind::kAllReduce).cost(sig, absl::MakeConstSpan(types)).bytes_communicated +
                kCollectiveLatencyBytes);
    }
  }
  return bytes;
}

namespace {

double LocalElements(Type global, const Layout& layout, const Mesh& mesh) {
  if (!global.is_tensor()) return 0;
  double n = 1;
  for (int64_t d : LocalDims(global.dims(), layout, mesh)) n *= static_cast<double>(d);
  return n;
}

// The element type whose peak prices the op: its first tensor result's (a matmul's
// product), else its first tensor operand's.
ElementType ComputeElementType(const Operation& op, absl::Span<const Type> operand_types) {
  for (const Value* result : op.results()) {
    if (result->type().is_tensor()) return result->type().element_type();
  }
  for (const Type& t : operand_types) {
    if (t.is_tensor()) return t.element_type();
  }
  return ElementType::kF32;
}

bool PartialAllowed(const OpRule& rule, int operand) {
  switch (rule.partial_mode) {
    case PartialMode::kNone: return false;
    case PartialMode::kFirst: return operand == 0;
    case PartialMode::kAll:
    case PartialMode::kAny: return true;
  }
  return false;
}

}  // namespace

bool CheaperChoice(const Choice& a, const Choice& b) {
  if (a.pinned_moves != b.pinned_moves) return a.pinned_moves < b.pinned_moves;
  const double ta = a.comm_cost + a.compute_cost, tb = b.comm_cost + b.compute_cost;
  double scale = std::max({1.0, std::abs(ta), std::abs(tb)});
  if (std::abs(ta - tb) > 1e-9 * scale) return ta < tb;
  return a.work < b.work;
}

std::vector<std::vector<int>> SharingUsers(absl::Span<Operation* const> ops) {
  std::vector<std::vector<int>> sharing(ops.size());
  // (value, op kind, operand position, attributes) -> users seen so far, walking
  // backwards. The attributes are part of the key: a matmul reading a weight as is and
  // one reading it transposed (the forward projection and the backward dX = dY W^T of a
  // gradient function) need different layouts of it, so neither reuses the other's
  // reshard.
  absl::flat_hash_map<std::tuple<const Value*, OpKind, int, AttrDict>, int> later;
  for (size_t k = ops.size(); k-- > 0;) {
    const Operation& op = *ops[k];
    sharing[k].resize(op.num_operands(), 1);
    for (int i = 0; i < op.num_operands(); ++i) {
      const Value* v = op.operand(i);
      if (v->is_literal()) continue;
      int& seen = later[{v, op.kind(), i, op.attrs()}];
      sharing[k][i] = 1 + seen;
      // An op reading the value twice at one position is not possible; at two positions
      // these are two different keys.
      ++seen;
    }
  }
  return sharing;
}

Choice ChooseStrategy(const StrategyQuery& q) {
  WeighedStrategies weighed = WeighStrategies(q);
  return std::move(weighed.candidates[weighed.chosen]);
}

WeighedStrategies WeighStrategies(const StrategyQuery& q) {
  const OpRule& rule = *q.rule;
  const Mesh& mesh = *q.mesh;
  const Operation& op = *q.op;
  std::vector<int> known;
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    if (rule.operands[i].is_tensor && i < q.operands.size() && q.operands[i]) {
      known.push_back(static_cast<int>(i));
    }
  }
  std::vector<int> targets;
  for (size_t r = 0; r < rule.results.size(); ++r) {
    if (rule.results[r].is_tensor && r < q.targets.size() && q.targets[r]) {
      targets.push_back(static_cast<int>(r));
    }
  }
  auto operand_type = [&](int i) {
    return static_cast<size_t>(i) < q.operand_types.size() ? q.operand_types[i]
                                                           : op.operand(i)->type();
  };
  auto merge_operand = [&](Strategy& s, int i) {
    MergeLayout(rule, rule.operands[i], *q.operands[i], mesh, s);
  };
  auto merge_target = [&](Strategy& s, int r) {
    MergeLayout(rule, rule.results[r], *q.targets[r], mesh, s);
  };
  auto available = [&](int i) -> absl::Span<const Layout> {
    if (static_cast<size_t>(i) >= q.available.size()) return {};
    return q.available[i];
  };

  std::vector<Strategy> candidates;
  std::vector<std::pair<CandidateOrigin, int>> origins;  // parallel to candidates
  auto add = [&](Strategy s, CandidateOrigin origin, int origin_index) {
    Legalize(rule, mesh, s);
    for (const Strategy& c : candidates) {
      if (c == s) return;
    }
    candidates.push_back(std::move(s));
    origins.push_back({origin, origin_index});
  };
  for (int i : known) {
    Strategy s;
    s.factors.resize(rule.num_factors());
    const Layout& layout = *q.operands[i];
    if (!layout.partial.empty() && PartialAllowed(rule, i)) {
      s.partial = layout.partial;
      s.partial_operand = rule.partial_mode == PartialMode::kAll ? -1 : i;
    }
    merge_operand(s, i);
    for (int j : known) {
      if (j != i) merge_operand(s, j);
    }
    for (int r : targets) merge_target(s, r);
    add(std::move(s), CandidateOrigin::kOperand, i);
  }
  // A layout an operand already exists in: a strategy that consumes it as is.
  for (int i : known) {
    for (const Layout& layout : available(i)) {
      Strategy s;
      s.factors.resize(rule.num_factors());
      if (!layout.partial.empty() && PartialAllowed(rule, i)) {
        s.partial = layout.partial;
        s.partial_operand = rule.partial_mode == PartialMode::kAll ? -1 : i;
      }
      MergeLayout(rule, rule.operands[i], layout, mesh, s);
      for (int j : known) {
        if (j != i) merge_operand(s, j);
      }
      for (int r : targets) merge_target(s, r);
      add(std::move(s), CandidateOrigin::kAvailable, i);
    }
  }
  if (!targets.empty()) {
    Strategy s;
    s.factors.resize(rule.num_factors());
    for (int r : targets) {
      const AxisList& partial = q.targets[r]->partial;
      if (partial.empty() || q.targets[r]->partial_kind != ReductionFn::kSum) continue;
      bool placed = false;
      for (int f = 0; f < rule.num_factors() && !placed; ++f) {
        if (rule.kinds[f] != FactorKind::kSum || !s.factors[f].empty()) continue;
        if (rule.sizes[f] % mesh.GroupSize(partial) != 0) continue;
        s.factors[f] = partial;
        placed = true;
      }
      if (!placed && rule.partial_mode != PartialMode::kNone && s.partial.empty()) {
        s.partial = partial;
        s.partial_operand = rule.partial_mode == PartialMode::kAll ? -1 : 0;
      }
    }
    for (int r : targets) merge_target(s, r);
    for (int i : known) merge_operand(s, i);
    add(std::move(s), CandidateOrigin::kTargets, -1);
  }
  add(Strategy{}, CandidateOrigin::kReplicated, -1);
  // The same with split statistics gathered instead.
  for (size_t c = 0, n = candidates.size(); c < n; ++c) {
    Strategy s = candidates[c];
    bool changed = false;
    for (int f = 0; f < rule.num_factors(); ++f) {
      if (rule.kinds[f] == FactorKind::kStats && !s.factors[f].empty()) {
        s.factors[f].clear();
        changed = true;
      }
    }
    if (changed) add(std::move(s), CandidateOrigin::kStatsGathered, static_cast<int>(c));
  }

  // The op's work on its global types, split among the blocks each strategy makes.
  std::vector<Type> global_operands;
  global_operands.reserve(op.num_operands());
  for (int i = 0; i < op.num_operands(); ++i) global_operands.push_back(operand_type(i));
  const OpCost global_cost = GlobalOpCost(op, global_operands, &mesh);
  const ElementType compute_type = ComputeElementType(op, global_operands);

  WeighedStrategies weighed;
  weighed.candidates.reserve(candidates.size());
  for (size_t k = 0; k < candidates.size(); ++k) {
    const Strategy& s = candidates[k];
    Choice c;
    c.strategy = s;
    c.origin = origins[k].first;
    c.origin_index = origins[k].second;
    double blocks = 1;
    for (const AxisList& axes : s.factors) blocks *= static_cast<double>(mesh.GroupSize(axes));
    c.compute_cost = ComputeCostBytes(global_cost, compute_type, blocks);
    for (size_t i = 0; i < rule.operands.size(); ++i) {
      Layout required = RequiredOperandLayout(rule, s, static_cast<int>(i), mesh);
      int source = -1;
      if (rule.operands[i].is_tensor) {
        Type global = operand_type(static_cast<int>(i));
        c.work += LocalElements(global, required, mesh);
        if (i < q.operands.size() && q.operands[i]) {
          const Layout* have = &*q.operands[i];
          double cost = ReshardCost(global, *have, required, mesh);
          absl::Span<const Layout> others = available(static_cast<int>(i));
          for (size_t a = 0; a < others.size() && cost > 0; ++a) {
            double reuse = ReshardCost(global, others[a], required, mesh);
            if (reuse < cost) {
              cost = reuse;
              have = &others[a];
              source = static_cast<int>(a);
            }
          }
          if (static_cast<size_t>(i) < q.sharing.size() && q.sharing[i] > 1) {
            double shared = cost / q.sharing[i];
            c.shared_discount += cost - shared;
            cost = shared;
          }
          if (cost > 0 && i < q.pinned.size() && q.pinned[i]) ++c.pinned_moves;
          c.comm_cost += cost;
          // Becoming partial is free of communication but not of work.
          if (required.partial.size() > have->partial.size()) c.work += LocalElements(global, required, mesh);
        }
      }
      c.operands.push_back(std::move(required));
      c.sources.push_back(source);
    }
    if (!rule.operands.empty()) c.comm_cost += StatsBytes(operand_type(0), rule, s, mesh);
    for (size_t r = 0; r < rule.results.size(); ++r) {
      Layout natural = NaturalResultLayout(rule, s, static_cast<int>(r), mesh);
      if (rule.results[r].is_tensor) {
        Type global = op.result(static_cast<int>(r))->type();
        c.work += LocalElements(global, natural, mesh);
        if (r < q.targets.size() && q.targets[r]) {
          c.comm_cost += ReshardCost(global, natural, *q.targets[r], mesh);
        } else if (!natural.partial.empty() && natural.partial_kind == ReductionFn::kMax) {
          Layout resolved = natural;
          resolved.partial.clear();
          resolved.partial_kind = ReductionFn::kSum;
          c.comm_cost += ReshardCost(global, natural, resolved, mesh);
        }
      }
      c.results.push_back(std::move(natural));
    }
    weighed.candidates.push_back(std::move(c));
    if (CheaperChoice(weighed.candidates.back(), weighed.candidates[weighed.chosen])) {
      weighed.chosen = k;
    }
  }
  return weighed;
}

}  // namespace commir::sharding
