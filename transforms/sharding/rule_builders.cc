#include "transforms/sharding/rule_builders.h"

#include "commir/attention_op.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace commir::sharding {
namespace {

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

}  // namespace

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

namespace {

std::vector<int64_t> NormalizedDims(const Operation& op, int64_t rank) {
  std::vector<int64_t> dims = op.attrs().Find("dims")->int_list().value_or(std::vector<int64_t>{});
  for (int64_t& d : dims) d = d < 0 ? d + rank : d;
  std::sort(dims.begin(), dims.end());
  return dims;
}

}  // namespace

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
  return rule;
}

namespace {

// Whether grouped-query attention should keep its key/value heads whole on every device
// and split only the query heads, as Megatron does when tensor parallelism is wider than
// the key/value heads (tp=16 with 8): the function's mesh is one axis of n devices, more
// than the key/value heads and a multiple of them, and n divides the query heads. Each
// device's query heads then use exactly one key/value head (DecomposeAttention slices
// it). On other meshes the nested rule below splits both.
bool ReplicatesKeyValueHeads(const Operation& op, int64_t heads, int64_t kv_heads) {
  const Function* function = op.parent_function();
  const Mesh* mesh = function != nullptr ? function->mesh() : nullptr;
  if (mesh == nullptr || mesh->axes().size() != 1 || kv_heads <= 0) return false;
  int64_t n = mesh->num_devices();
  return n > kv_heads && n % kv_heads == 0 && heads % n == 0 && heads != kv_heads;
}

}  // namespace

OpRule AttentionRule(const Operation& op) {
  OpRule rule;
  Type q = op.operand(0)->type();
  Type k = op.operand(1)->type();
  Type v = op.operand(2)->type();
  int64_t heads = q.dims()[1];
  int64_t kv_heads = k.dims()[1];
  if (ReplicatesKeyValueHeads(op, heads, kv_heads)) {
    int b = rule.AddFactor(q.dims()[0], FactorKind::kPass);
    int hq = rule.AddFactor(heads, FactorKind::kPass);
    int hkv = rule.AddFactor(kv_heads, FactorKind::kReplicate);
    int sq = rule.AddFactor(q.dims()[2], FactorKind::kPass);
    int skv = rule.AddFactor(k.dims()[2], FactorKind::kReplicate);
    int d = rule.AddFactor(q.dims()[3], FactorKind::kReplicate);
    int dv = rule.AddFactor(v.dims()[3], FactorKind::kPass);
    rule.operands.push_back({true, {{b}, {hq}, {sq}, {d}}});
    rule.operands.push_back({true, {{b}, {hkv}, {skv}, {d}}});
    rule.operands.push_back({true, {{b}, {hkv}, {skv}, {dv}}});
    for (int i = 3; i < op.num_operands(); ++i) rule.operands.push_back(NonTensor());
    rule.results.push_back({true, {{b}, {hq}, {sq}, {dv}}});
    if (op.num_results() == 2) rule.results.push_back({true, {{b}, {hq}, {sq}}});
    return rule;
  }
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

OpRule AttentionMergeRule(const Operation& op) {
  OpRule rule;
  const std::vector<int64_t>& o = op.operand(0)->type().dims();
  std::vector<std::vector<int>> row_dims;
  for (size_t d = 0; d + 1 < o.size(); ++d) row_dims.push_back({rule.AddFactor(o[d], FactorKind::kPass)});
  std::vector<std::vector<int>> o_dims = row_dims;
  o_dims.push_back({rule.AddFactor(o.back(), FactorKind::kPass)});
  for (int i = 0; i < op.num_operands(); ++i) rule.operands.push_back({true, i % 2 == 0 ? o_dims : row_dims});
  rule.results.push_back({true, o_dims});
  rule.results.push_back({true, row_dims});
  return rule;
}

OpRule AttentionGradRule(const Operation& op) {
  OpRule rule;
  const std::vector<int64_t>& q = op.operand(AttentionGradOp::kQ)->type().dims();
  const std::vector<int64_t>& k = op.operand(AttentionGradOp::kK)->type().dims();
  const std::vector<int64_t>& v = op.operand(AttentionGradOp::kV)->type().dims();
  int64_t kv_heads = k[1];
  int b = rule.AddFactor(q[0], FactorKind::kPass);
  int hkv = rule.AddFactor(kv_heads, FactorKind::kPass);
  // The query heads of a kv head's group and the query sequence are summed out of dk and
  // dv (each device's queries add their share) but stay split in dq, o, lse and dout.
  int group = rule.AddFactor(kv_heads == 0 ? 1 : q[1] / kv_heads, FactorKind::kSum);
  int sq = rule.AddFactor(q[2], FactorKind::kSum);
  // Every query needs every key (and the whole rows of its scores), and each head dim
  // whole for its dot products.
  int skv = rule.AddFactor(k[2], FactorKind::kReplicate);
  int d = rule.AddFactor(q[3], FactorKind::kReplicate);
  int dv = rule.AddFactor(v[3], FactorKind::kReplicate);
  const TensorFactors queries{true, {{b}, {hkv, group}, {sq}, {d}}};
  const TensorFactors keys{true, {{b}, {hkv}, {skv}, {d}}};
  const TensorFactors values{true, {{b}, {hkv}, {skv}, {dv}}};
  const TensorFactors outputs{true, {{b}, {hkv, group}, {sq}, {dv}}};
  rule.operands = {queries, keys, values, outputs, {true, {{b}, {hkv, group}, {sq}}}, outputs};
  for (int i = AttentionGradOp::kQPos; i < op.num_operands(); ++i) rule.operands.push_back(NonTensor());
  rule.results = {queries, keys, values};
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

}  // namespace commir::sharding
