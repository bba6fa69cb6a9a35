#include "transforms/sharding/op_rules.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace commir::sharding {
namespace {

bool Contains(const AxisList& axes, absl::string_view axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

std::vector<std::vector<int>> Dims(size_t rank) { return std::vector<std::vector<int>>(rank); }

TensorFactors NonTensor() {
  TensorFactors t;
  t.is_tensor = false;
  return t;
}

bool IsTensorOperand(const Value* v) { return !v->is_literal() && v->type().is_tensor(); }

// One kPass factor per dimension of `type`, shared by an operand and a result of the
// same shape.
std::vector<int> FactorPerDim(OpRule& rule, Type type, FactorKind kind = FactorKind::kPass) {
  std::vector<int> factors;
  for (int64_t size : type.dims()) factors.push_back(rule.AddFactor(size, kind));
  return factors;
}

std::vector<std::vector<int>> Singletons(const std::vector<int>& factors) {
  std::vector<std::vector<int>> dims;
  for (int f : factors) dims.push_back({f});
  return dims;
}

// Dimensions of `operand` aligned with the trailing dimensions of the result (NumPy
// broadcasting): an operand dimension of the result's size maps to its factor, a
// broadcast one to none.
TensorFactors Broadcasting(Type operand, const std::vector<int64_t>& result_dims,
                           const std::vector<int>& result_factors) {
  TensorFactors t;
  size_t rank = operand.dims().size();
  t.dims = Dims(rank);
  if (rank > result_dims.size()) return t;
  for (size_t k = 0; k < rank; ++k) {
    size_t rd = k + (result_dims.size() - rank);
    if (operand.dims()[k] == result_dims[rd]) t.dims[k] = {result_factors[rd]};
  }
  return t;
}

// Whether converting `from` to `to` loses nothing, so that converting each addend of a
// partial value and summing gives the converted sum.
bool IsExactConversion(ElementType from, ElementType to) {
  if (from == to) return true;
  auto rank = [](ElementType t) {
    switch (t) {
      case ElementType::kF16:
      case ElementType::kBF16: return 1;
      case ElementType::kF32: return 2;
      case ElementType::kF64: return 3;
      default: return 0;
    }
  };
  return rank(from) > 0 && rank(to) > rank(from) &&
         !(from == ElementType::kF16 && to == ElementType::kBF16);
}

// Unary ops linear in their operand (so a partial operand passes through): neg, and
// conversions that lose no precision.
bool IsLinearUnary(const Operation& op) {
  if (op.Is(OpKind::kNeg)) return true;
  if (!op.Is(OpKind::kConvert) || !op.operand(0)->type().is_tensor()) return false;
  return IsExactConversion(op.operand(0)->type().element_type(),
                           op.result(0)->type().element_type());
}

OpRule ElementwiseRule(const Operation& op) {
  OpRule rule;
  Type result = op.result(0)->type();
  std::vector<int> factors = FactorPerDim(rule, result);
  bool any_literal = false;
  for (Value* v : op.operands()) {
    if (!IsTensorOperand(v)) {
      rule.operands.push_back(NonTensor());
      any_literal = true;
      continue;
    }
    rule.operands.push_back(Broadcasting(v->type(), result.dims(), factors));
  }
  rule.results.push_back({true, Singletons(factors)});
  switch (op.kind()) {
    case OpKind::kAdd:
    case OpKind::kSub: rule.partial_mode = any_literal ? PartialMode::kNone : PartialMode::kAll; break;
    case OpKind::kMul: rule.partial_mode = PartialMode::kAny; break;
    case OpKind::kDiv:
      rule.partial_mode = rule.operands[0].is_tensor ? PartialMode::kFirst : PartialMode::kNone;
      break;
    default:
      rule.partial_mode = IsLinearUnary(op) ? PartialMode::kFirst : PartialMode::kNone;
  }
  return rule;
}

OpRule MatmulRule(const Operation& op) {
  OpRule rule;
  Type a = op.operand(0)->type();
  Type b = op.operand(1)->type();
  Type result = op.result(0)->type();
  bool ta = op.BoolAttr("transpose_a");
  bool tb = op.BoolAttr("transpose_b");
  size_t batch = result.dims().size() - 2;
  std::vector<int> factors;
  for (size_t i = 0; i < batch; ++i) factors.push_back(rule.AddFactor(result.dims()[i], FactorKind::kPass));
  int64_t ra = a.rank();
  int m = rule.AddFactor(result.dims()[batch], FactorKind::kPass);
  int n = rule.AddFactor(result.dims()[batch + 1], FactorKind::kPass);
  int k = rule.AddFactor(ta ? a.dims()[ra - 2] : a.dims()[ra - 1], FactorKind::kSum);
  auto operand = [&](Type t, bool transposed, int row, int col) {
    TensorFactors tf;
    tf.dims = Dims(t.rank());
    size_t tb_rank = t.rank() - 2;
    for (size_t j = 0; j < tb_rank && tb_rank <= batch; ++j) {
      size_t rd = j + batch - tb_rank;
      if (t.dims()[j] == result.dims()[rd]) tf.dims[j] = {factors[rd]};
    }
    tf.dims[tb_rank] = {transposed ? col : row};
    tf.dims[tb_rank + 1] = {transposed ? row : col};
    return tf;
  };
  rule.operands.push_back(operand(a, ta, m, k));
  rule.operands.push_back(operand(b, tb, k, n));
  std::vector<int> result_factors = factors;
  result_factors.push_back(m);
  result_factors.push_back(n);
  rule.results.push_back({true, Singletons(result_factors)});
  rule.partial_mode = PartialMode::kAny;
  return rule;
}

std::vector<int64_t> NormalizedDims(const Operation& op, int64_t rank) {
  std::vector<int64_t> dims = op.attrs().Find("dims")->int_list().value_or(std::vector<int64_t>{});
  for (int64_t& d : dims) d = d < 0 ? d + rank : d;
  std::sort(dims.begin(), dims.end());
  return dims;
}

OpRule ReduceRule(const Operation& op) {
  OpRule rule;
  Type x = op.operand(0)->type();
  std::vector<int64_t> reduced = NormalizedDims(op, x.rank());
  bool keepdim = op.BoolAttr("keepdim");
  FactorKind reduce_kind = op.Is(OpKind::kReduceMax) ? FactorKind::kMax : FactorKind::kSum;
  TensorFactors operand, result;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool is_reduced = std::binary_search(reduced.begin(), reduced.end(), d);
    int f = rule.AddFactor(x.dims()[d], is_reduced ? reduce_kind : FactorKind::kPass);
    operand.dims.push_back({f});
    if (!is_reduced) {
      result.dims.push_back({f});
    } else if (keepdim) {
      result.dims.push_back({});
    }
  }
  rule.operands.push_back(operand);
  rule.results.push_back(result);
  rule.partial_mode = op.Is(OpKind::kReduceMax) ? PartialMode::kNone : PartialMode::kFirst;
  return rule;
}

OpRule SoftmaxRule(const Operation& op) {
  OpRule rule;
  Type x = op.operand(0)->type();
  int64_t dim = op.IntAttr("dim");
  if (dim < 0) dim += x.rank();
  std::vector<int> factors;
  for (int64_t d = 0; d < x.rank(); ++d) {
    factors.push_back(rule.AddFactor(x.dims()[d], d == dim ? FactorKind::kStats : FactorKind::kPass));
  }
  rule.operands.push_back({true, Singletons(factors)});
  rule.results.push_back({true, Singletons(factors)});
  rule.stats_all_reduces = 2;
  return rule;
}

OpRule NormRule(const Operation& op) {
  OpRule rule;
  Type x = op.operand(0)->type();
  std::vector<int> factors;
  for (int64_t d = 0; d < x.rank(); ++d) {
    factors.push_back(rule.AddFactor(
        x.dims()[d], d + 1 == x.rank() ? FactorKind::kStats : FactorKind::kPass));
  }
  rule.operands.push_back({true, Singletons(factors)});
  for (int i = 1; i < op.num_operands(); ++i) rule.operands.push_back({true, {{factors.back()}}});
  rule.results.push_back({true, Singletons(factors)});
  rule.stats_all_reduces = op.Is(OpKind::kLayerNorm) ? 2 : 1;
  return rule;
}

OpRule AttentionRule(const Operation& op) {
  OpRule rule;
  Type q = op.operand(0)->type();
  Type k = op.operand(1)->type();
  Type v = op.operand(2)->type();
  int64_t heads = q.dims()[1];
  int64_t kv_heads = k.dims()[1];
  int b = rule.AddFactor(q.dims()[0], FactorKind::kPass);
  int hkv = rule.AddFactor(kv_heads, FactorKind::kPass);
  int group = rule.AddFactor(kv_heads == 0 ? 1 : heads / kv_heads, FactorKind::kPass);
  int sq = rule.AddFactor(q.dims()[2], FactorKind::kPass);
  int skv = rule.AddFactor(k.dims()[2], FactorKind::kReplicate);
  int d = rule.AddFactor(q.dims()[3], FactorKind::kReplicate);
  int dv = rule.AddFactor(v.dims()[3], FactorKind::kPass);
  rule.operands.push_back({true, {{b}, {hkv, group}, {sq}, {d}}});
  rule.operands.push_back({true, {{b}, {hkv}, {skv}, {d}}});
  rule.operands.push_back({true, {{b}, {hkv}, {skv}, {dv}}});
  for (int i = 3; i < op.num_operands(); ++i) rule.operands.push_back(NonTensor());
  rule.results.push_back({true, {{b}, {hkv, group}, {sq}, {dv}}});
  if (op.num_results() == 2) rule.results.push_back({true, {{b}, {hkv, group}, {sq}}});
  return rule;
}

// Splits the reshape into factors: common major parts of input and output dimensions
// (found with gcds, walking both shapes from the major end) are shared kPass factors;
// stretches that do not factor become kReplicate factors of their own on each side.
OpRule ReshapeRule(const Operation& op) {
  OpRule rule;
  const std::vector<int64_t>& in = op.operand(0)->type().dims();
  const std::vector<int64_t>& out = op.result(0)->type().dims();
  TensorFactors operand{true, Dims(in.size())};
  TensorFactors result{true, Dims(out.size())};
  bool empty = std::find(in.begin(), in.end(), 0) != in.end() ||
               std::find(out.begin(), out.end(), 0) != out.end();
  if (empty) {
    for (size_t i = 0; i < in.size(); ++i) operand.dims[i] = {rule.AddFactor(in[i], FactorKind::kReplicate)};
    for (size_t j = 0; j < out.size(); ++j) result.dims[j] = {rule.AddFactor(out[j], FactorKind::kReplicate)};
  } else {
    size_t n = in.size(), m = out.size();
    size_t i = 0, j = 0;
    int64_t ri = n > 0 ? in[0] : 1;
    int64_t rj = m > 0 ? out[0] : 1;
    for (;;) {
      while (i < n && ri == 1) {
        ++i;
        ri = i < n ? in[i] : 1;
      }
      while (j < m && rj == 1) {
        ++j;
        rj = j < m ? out[j] : 1;
      }
      if (i >= n || j >= m) break;
      int64_t g = std::gcd(ri, rj);
      if (g > 1) {
        int f = rule.AddFactor(g, FactorKind::kPass);
        operand.dims[i].push_back(f);
        result.dims[j].push_back(f);
        ri /= g;
        rj /= g;
        continue;
      }
      // A stretch that does not factor: extend it until both sides cover the same
      // elements.
      operand.dims[i].push_back(rule.AddFactor(ri, FactorKind::kReplicate));
      result.dims[j].push_back(rule.AddFactor(rj, FactorKind::kReplicate));
      int64_t covered_in = ri, covered_out = rj;
      while (covered_in != covered_out) {
        if (covered_in < covered_out) {
          if (++i >= n) break;
          operand.dims[i].push_back(rule.AddFactor(in[i], FactorKind::kReplicate));
          covered_in *= in[i];
        } else {
          if (++j >= m) break;
          result.dims[j].push_back(rule.AddFactor(out[j], FactorKind::kReplicate));
          covered_out *= out[j];
        }
      }
      ++i;
      ++j;
      ri = i < n ? in[i] : 1;
      rj = j < m ? out[j] : 1;
    }
  }
  rule.operands.push_back(std::move(operand));
  rule.results.push_back(std::move(result));
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

OpRule TransposeRule(const Operation& op) {
  OpRule rule;
  Type x = op.operand(0)->type();
  std::vector<int> factors = FactorPerDim(rule, x);
  std::vector<int64_t> perm = op.attrs().Find("perm")->int_list().value_or(std::vector<int64_t>{});
  TensorFactors result;
  for (int64_t p : perm) result.dims.push_back({factors[p < 0 ? p + x.rank() : p]});
  rule.operands.push_back({true, Singletons(factors)});
  rule.results.push_back(std::move(result));
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

OpRule SliceRule(const Operation& op) {
  OpRule rule;
  Type x = op.operand(0)->type();
  Type r = op.result(0)->type();
  std::vector<int64_t> start = op.attrs().Find("start")->int_list().value_or(std::vector<int64_t>{});
  TensorFactors operand, result;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (start[d] == 0 && r.dims()[d] == x.dims()[d]) {
      int f = rule.AddFactor(x.dims()[d], FactorKind::kPass);
      operand.dims.push_back({f});
      result.dims.push_back({f});
    } else {
      operand.dims.push_back({rule.AddFactor(x.dims()[d], FactorKind::kReplicate)});
      result.dims.push_back({rule.AddFactor(r.dims()[d], FactorKind::kReplicate)});
    }
  }
  rule.operands.push_back(std::move(operand));
  rule.results.push_back(std::move(result));
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

OpRule ConcatRule(const Operation& op) {
  OpRule rule;
  Type r = op.result(0)->type();
  int64_t dim = op.attrs().GetInt("dim", 0);
  if (dim < 0) dim += r.rank();
  std::vector<int> shared(r.rank(), -1);
  for (int64_t d = 0; d < r.rank(); ++d) {
    if (d != dim) shared[d] = rule.AddFactor(r.dims()[d], FactorKind::kPass);
  }
  for (Value* v : op.operands()) {
    TensorFactors t;
    for (int64_t d = 0; d < r.rank(); ++d) {
      t.dims.push_back({d == dim ? rule.AddFactor(v->type().dims()[d], FactorKind::kReplicate)
                                 : shared[d]});
    }
    rule.operands.push_back(std::move(t));
  }
  TensorFactors result;
  for (int64_t d = 0; d < r.rank(); ++d) {
    result.dims.push_back({d == dim ? rule.AddFactor(r.dims()[d], FactorKind::kReplicate) : shared[d]});
  }
  rule.results.push_back(std::move(result));
  rule.partial_mode = PartialMode::kAll;
  return rule;
}

OpRule BroadcastRule(const Operation& op) {
  OpRule rule;
  Type r = op.result(0)->type();
  std::vector<int> factors = FactorPerDim(rule, r);
  rule.operands.push_back(Broadcasting(op.operand(0)->type(), r.dims(), factors));
  rule.results.push_back({true, Singletons(factors)});
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

OpRule IdentityRule(const Operation& op) {
  OpRule rule;
  std::vector<int> factors = FactorPerDim(rule, op.operand(0)->type());
  rule.operands.push_back({true, Singletons(factors)});
  rule.results.push_back({true, Singletons(factors)});
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

OpRule FullRule(const Operation& op) {
  OpRule rule;
  Type r = op.result(0)->type();
  if (!r.is_tensor()) {
    rule.results.push_back(NonTensor());
    return rule;
  }
  rule.results.push_back({true, Singletons(FactorPerDim(rule, r))});
  return rule;
}

}  // namespace

int OpRule::AddFactor(int64_t size, FactorKind kind) {
  sizes.push_back(size);
  kinds.push_back(kind);
  return static_cast<int>(sizes.size()) - 1;
}

absl::StatusOr<OpRule> RuleFor(const Operation& op) {
  for (Value* result : op.results()) {
    if (result->type().is_null()) return absl::InvalidArgumentError("an op result has no type");
  }
  switch (op.kind()) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSilu:
    case OpKind::kGelu:
    case OpKind::kConvert:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kPow:
      if (!op.result(0)->type().is_tensor()) break;
      return ElementwiseRule(op);
    case OpKind::kFull: return FullRule(op);
    case OpKind::kMatmul: return MatmulRule(op);
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMean: return ReduceRule(op);
    case OpKind::kSoftmax: return SoftmaxRule(op);
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: return NormRule(op);
    case OpKind::kAttention: return AttentionRule(op);
    case OpKind::kReshape: return ReshapeRule(op);
    case OpKind::kTranspose: return TransposeRule(op);
    case OpKind::kSlice: return SliceRule(op);
    case OpKind::kConcat: return ConcatRule(op);
    case OpKind::kBroadcast: return BroadcastRule(op);
    case OpKind::kReshard: return IdentityRule(op);
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", op.name(), "' has no sharding rule (it is not an op of global functions)"));
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

Layout RequiredOperandLayout(const OpRule& rule, const Strategy& s, int i, const Mesh&) {
  Layout layout;
  const TensorFactors& t = rule.operands[i];
  if (!t.is_tensor) return layout;
  for (const std::vector<int>& dim : t.dims) layout.dims.push_back(DimAxes(s, dim));
  bool carries = rule.partial_mode == PartialMode::kAll || s.partial_operand == i;
  if (carries) layout.partial = s.partial;
  return layout;
}

Layout NaturalResultLayout(const OpRule& rule, const Strategy& s, int i, const Mesh& mesh) {
  Layout layout;
  const TensorFactors& t = rule.results[i];
  if (!t.is_tensor) return layout;
  for (const std::vector<int>& dim : t.dims) layout.dims.push_back(DimAxes(s, dim));
  AxisList partial = s.partial;
  AxisList max_partial;
  for (int f = 0; f < rule.num_factors(); ++f) {
    if (rule.kinds[f] == FactorKind::kSum) {
      partial.insert(partial.end(), s.factors[f].begin(), s.factors[f].end());
    } else if (rule.kinds[f] == FactorKind::kMax) {
      max_partial.insert(max_partial.end(), s.factors[f].begin(), s.factors[f].end());
    }
  }
  if (!max_partial.empty()) {
    layout.partial = InMeshOrder(max_partial, mesh);
    layout.partial_kind = ReduceKind::kMax;
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
               (GetOpDef(OpKind::kAllReduce).cost(sig, absl::MakeConstSpan(types)).bytes_communicated +
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

Choice ChooseStrategy(const StrategyQuery& q) {
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

  std::vector<Strategy> candidates;
  auto add = [&](Strategy s) {
    Legalize(rule, mesh, s);
    for (const Strategy& c : candidates) {
      if (c == s) return;
    }
    candidates.push_back(std::move(s));
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
    add(std::move(s));
  }
  if (!targets.empty()) {
    Strategy s;
    s.factors.resize(rule.num_factors());
    for (int r : targets) {
      const AxisList& partial = q.targets[r]->partial;
      if (partial.empty() || q.targets[r]->partial_kind != ReduceKind::kSum) continue;
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
    add(std::move(s));
  }
  add(Strategy{});
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
    if (changed) add(std::move(s));
  }

  Choice best;
  bool have_best = false;
  for (const Strategy& s : candidates) {
    Choice c;
    c.strategy = s;
    for (size_t i = 0; i < rule.operands.size(); ++i) {
      Layout required = RequiredOperandLayout(rule, s, static_cast<int>(i), mesh);
      if (rule.operands[i].is_tensor) {
        Type global = operand_type(static_cast<int>(i));
        c.work += LocalElements(global, required, mesh);
        if (i < q.operands.size() && q.operands[i]) {
          const Layout& have = *q.operands[i];
          c.comm_cost += ReshardCost(global, have, required, mesh);
          // Becoming partial is free of communication but not of work.
          if (required.partial.size() > have.partial.size()) c.work += LocalElements(global, required, mesh);
        }
      }
      c.operands.push_back(std::move(required));
    }
    if (!rule.operands.empty()) c.comm_cost += StatsBytes(operand_type(0), rule, s, mesh);
    for (size_t r = 0; r < rule.results.size(); ++r) {
      Layout natural = NaturalResultLayout(rule, s, static_cast<int>(r), mesh);
      if (rule.results[r].is_tensor) {
        Type global = op.result(static_cast<int>(r))->type();
        c.work += LocalElements(global, natural, mesh);
        if (r < q.targets.size() && q.targets[r]) {
          c.comm_cost += ReshardCost(global, natural, *q.targets[r], mesh);
        } else if (!natural.partial.empty() && natural.partial_kind == ReduceKind::kMax) {
          Layout resolved = natural;
          resolved.partial.clear();
          resolved.partial_kind = ReduceKind::kSum;
          c.comm_cost += ReshardCost(global, natural, resolved, mesh);
        }
      }
      c.results.push_back(std::move(natural));
    }
    auto better = [](const Choice& a, const Choice& b) {
      double scale = std::max({1.0, std::abs(a.comm_cost), std::abs(b.comm_cost)});
      if (std::abs(a.comm_cost - b.comm_cost) > 1e-9 * scale) return a.comm_cost < b.comm_cost;
      return a.work < b.work;
    };
    if (!have_best || better(c, best)) {
      best = std::move(c);
      have_best = true;
    }
  }
  return best;
}

}  // namespace commir::sharding
