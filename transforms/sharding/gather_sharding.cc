#include "transforms/sharding/gather_sharding.h"

#include <vector>

#include "commir/status_macros.h"
#include "transforms/sharding/layout.h"

namespace commir::sharding {
namespace {

int64_t AxisOf(const Operation& op) {
  const int64_t axis = op.RequiredIntAttr("axis");
  return axis < 0 ? axis + op.operand(0)->type().rank() : axis;
}

// Factors of the table (or base) and of the indices, and the result's dimensions built
// from them: table[:axis] + indices + table[axis+1:].
struct RowFactors {
  std::vector<int> table;    // one per table dimension
  std::vector<int> indices;  // one per indices dimension
  std::vector<std::vector<int>> result;
};

RowFactors AddRowFactors(OpRule& rule, const Operation& op, FactorKind axis_kind,
                         FactorKind index_kind) {
  const Type table = op.operand(0)->type();
  const Type indices = op.operand(1)->type();
  const int64_t axis = AxisOf(op);
  RowFactors f;
  for (int64_t d = 0; d < table.rank(); ++d) {
    f.table.push_back(rule.AddFactor(table.dims()[d], d == axis ? axis_kind : FactorKind::kPass));
  }
  for (int64_t size : indices.dims()) f.indices.push_back(rule.AddFactor(size, index_kind));
  for (int64_t d = 0; d < axis; ++d) f.result.push_back({f.table[d]});
  for (int index : f.indices) f.result.push_back({index});
  for (int64_t d = axis + 1; d < table.rank(); ++d) f.result.push_back({f.table[d]});
  return f;
}

TensorFactors OneFactorEach(const std::vector<int>& factors) {
  TensorFactors t;
  for (int f : factors) t.dims.push_back({f});
  return t;
}

}  // namespace

OpRule GatherRule(const Operation& op) {
  OpRule rule;
  RowFactors f = AddRowFactors(rule, op, FactorKind::kSum, FactorKind::kPass);
  rule.operands.push_back(OneFactorEach(f.table));
  rule.operands.push_back(OneFactorEach(f.indices));
  rule.results.push_back({true, f.result});
  rule.partial_mode = PartialMode::kFirst;
  return rule;
}

// The indices' dimensions are summed over: split (an embedding's backward with its
// tokens over dp), each device adds its own updates' rows into its copy of the base, and
// the result is partial over those axes, summed by whoever needs it whole (a gradient's
// all_reduce over dp, as DDP sums Megatron-LM's embedding gradient), with the base
// counted once (added_once_operand). The indices are never gathered for it.
OpRule ScatterAddRule(const Operation& op) {
  OpRule rule;
  RowFactors f = AddRowFactors(rule, op, FactorKind::kPass, FactorKind::kSum);
  rule.operands.push_back(OneFactorEach(f.table));
  rule.operands.push_back(OneFactorEach(f.indices));
  rule.operands.push_back({true, f.result});
  rule.results.push_back(OneFactorEach(f.table));
  rule.added_once_operand = 0;
  return rule;
}

namespace {

// The op on each device's block of operand 0 split along the axis, with the block's
// first global row as its trailing offset operand; nullopt when the axis is not split.
DecompositionResult WithRowOffset(const DecompositionInput& in) {
  const int64_t axis = AxisOf(in.op);
  const AxisList& axes = in.choice.strategy.factors[in.rule.operands[0].dims[axis][0]];
  if (axes.empty()) return std::nullopt;
  OpBuilder& e = in.emitter;
  const int64_t local_rows = in.operands[0].value->type().dims()[axis];
  COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
  Value* offset = rank;
  if (local_rows != 1) {
    COMMIR_ASSIGN_OR_RETURN(
        offset, e.CreateValue(OpKind::kMul, {rank, OpBuilder::Operand::Literal(
                                                       static_cast<double>(local_rows),
                                                       Type::Index())}));
  }
  offset->set_name("row_offset");
  std::vector<OpBuilder::Operand> operands(in.operands.begin(), in.operands.end());
  operands.push_back(offset);
  COMMIR_ASSIGN_OR_RETURN(Operation * local,
                          e.Create(in.op.kind(), operands, in.op.attrs(), {}, 1));
  return local->results();
}

}  // namespace

DecompositionResult DecomposeGather(const DecompositionInput& in) { return WithRowOffset(in); }

DecompositionResult DecomposeScatterAdd(const DecompositionInput& in) { return WithRowOffset(in); }

}  // namespace commir::sharding
