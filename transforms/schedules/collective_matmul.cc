#include "transforms/schedules/collective_matmul.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "commir/check.h"
#include "commir/status_macros.h"

namespace commir::schedules::cmm {
namespace {

struct MatmulShape {
  int64_t ra, rb, rr;
  bool ta, tb;
};

MatmulShape ShapeOf(const Operation& mm) {
  MatmulShape s;
  s.ra = mm.operand(0)->type().rank();
  s.rb = mm.operand(1)->type().rank();
  s.rr = mm.result(0)->type().rank();
  s.ta = mm.BoolAttr("transpose_a");
  s.tb = mm.BoolAttr("transpose_b");
  return s;
}

// The result dimension that dimension `d` of operand `which` indexes; -1 if contracted.
int ResultDimOf(const Operation& mm, int which, int64_t d) {
  MatmulShape s = ShapeOf(mm);
  int64_t rank = which == 0 ? s.ra : s.rb;
  if (d < rank - 2) return static_cast<int>(d + (s.rr - rank));
  if (which == 0) {
    int64_t m = s.ta ? rank - 1 : rank - 2;
    return d == m ? static_cast<int>(s.rr - 2) : -1;
  }
  int64_t n = s.tb ? rank - 2 : rank - 1;
  return d == n ? static_cast<int>(s.rr - 1) : -1;
}

// The dimension of operand `which` that indexes result dimension `r`, if that operand
// has one of size > 1 (-1: the operand is broadcast along r, or r is the other
// operand's matrix dimension).
int OperandDimOf(const Operation& mm, int which, int r) {
  MatmulShape s = ShapeOf(mm);
  int64_t rank = which == 0 ? s.ra : s.rb;
  const std::vector<int64_t>& dims = mm.operand(which)->type().dims();
  if (r >= s.rr - 2) {
    if (which == 0 && r == s.rr - 2) return static_cast<int>(s.ta ? rank - 1 : rank - 2);
    if (which == 1 && r == s.rr - 1) return static_cast<int>(s.tb ? rank - 2 : rank - 1);
    return -1;
  }
  int64_t d = r - (s.rr - rank);
  if (d < 0 || dims[d] == 1) return -1;
  return static_cast<int>(d);
}

bool IsCollectiveOnGroup(const Operation& op, const Mesh* mesh, int64_t* group) {
  if (mesh == nullptr) return false;
  const Attribute* axis = op.attrs().Find("axis");
  if (axis == nullptr) return false;
  *group = mesh->GroupSize(axis->axes());
  return *group > 1 && op.stream_operand() == nullptr && !op.attrs().Has("stream");
}

// Whether `v` is available right before `position` (both in `block`).
bool AvailableBefore(const Value* v, const Block* block,
                     const absl::flat_hash_map<const Operation*, int>& order, int position) {
  if (v->is_literal()) return true;
  const Operation* def = v->defining_op();
  if (def == nullptr) return true;  // a block argument of this block or an enclosing one
  if (def->parent_block() != block) return true;  // an enclosing block's value dominates
  auto it = order.find(def);
  return it != order.end() && it->second < position;
}

// Whether every user of `m.gather` other than its matched matmuls comes after the first
// of those (where a schedule puts its loop) in `block`, or inside an op that does: then
// the whole gathered value the schedule can assemble is defined before them all.
bool OtherUsersFollow(const GatherMatch& m, const Block* block,
                      const absl::flat_hash_map<const Operation*, int>& order) {
  const int first = order.at(m.uses.front().matmul);
  absl::flat_hash_set<const Operation*> matched;
  for (const GatherUse& u : m.uses) matched.insert(u.matmul);
  bool any = false;
  for (const Operation* user : m.gather->result(0)->users()) {
    if (matched.contains(user)) continue;
    any = true;
    const Operation* at = user;  // the user, or the op of `block` it is nested in
    while (at != nullptr && at->parent_block() != block) {
      const Block* parent = at->parent_block();
      at = parent == nullptr ? nullptr : parent->parent_op();
    }
    auto it = at == nullptr ? order.end() : order.find(at);
    if (it == order.end() || it->second <= first) return false;
  }
  return any;
}

// Whether `v` is a matmul of `block` that only the scatter reads (through `adds`), or,
// when `sum`, an add of two such values of its own type read once; collects the matmuls
// (in operand order) and the adds.
bool SummedMatmuls(Value* v, const Block* block,
                   const absl::flat_hash_set<const Operation*>& claimed, bool sum,
                   std::vector<Operation*>& matmuls, std::vector<Operation*>& adds) {
  Operation* def = v->defining_op();
  if (def == nullptr || def->parent_block() != block || v->users().size() != 1 ||
      def->stream_operand() != nullptr || def->attrs().Has("stream")) {
    return false;
  }
  if (def->Is(OpKind::kMatmul)) {
    if (claimed.contains(def)) return false;
    matmuls.push_back(def);
    return true;
  }
  if (!sum || !def->Is(OpKind::kAdd) || def->num_operands() != 2) return false;
  for (Value* operand : def->operands()) {
    if (operand->is_literal() || operand->type() != v->type()) return false;
  }
  if (def->operand(0) == def->operand(1)) return false;  // x + x: one value, two reads
  if (!SummedMatmuls(def->operand(0), block, claimed, sum, matmuls, adds) ||
      !SummedMatmuls(def->operand(1), block, claimed, sum, matmuls, adds)) {
    return false;
  }
  adds.push_back(def);
  return true;
}

void MatchBlock(Block* block, const Mesh* mesh, CollectiveMatmulMatches& out) {
  absl::flat_hash_map<const Operation*, int> order;
  int index = 0;
  for (Operation* op : *block) order[op] = index++;
  absl::flat_hash_set<const Operation*> claimed;
  for (Operation* op : *block) {
    for (int r = 0; r < op->num_regions(); ++r) MatchBlock(op->region(r), mesh, out);
    int64_t group = 1;
    if (op->Is(OpKind::kAllGather) && IsCollectiveOnGroup(*op, mesh, &group)) {
      GatherMatch match;
      match.gather = op;
      match.axes = op->attrs().Find("axis")->axes();
      match.group = group;
      match.dim = op->attrs().GetInt("dim", 0);
      if (match.dim < 0) match.dim += op->operand(0)->type().rank();
      match.local = op->operand(0)->type().dims()[match.dim];
      Value* gathered = op->result(0);
      std::vector<Operation*> users = gathered->users();
      std::sort(users.begin(), users.end());
      users.erase(std::unique(users.begin(), users.end()), users.end());
      std::sort(users.begin(), users.end(), [&](const Operation* a, const Operation* b) {
        auto ia = order.find(a), ib = order.find(b);
        int xa = ia == order.end() ? 1 << 30 : ia->second;
        int xb = ib == order.end() ? 1 << 30 : ib->second;
        return xa < xb;
      });
      int first = -1;
      for (Operation* user : users) {
        if (!user->Is(OpKind::kMatmul) || user->parent_block() != block || claimed.contains(user) ||
            user->stream_operand() != nullptr || user->attrs().Has("stream")) {
          continue;
        }
        bool as_a = user->operand(0) == gathered, as_b = user->operand(1) == gathered;
        if (as_a == as_b) continue;  // both operands (or neither): not a block product
        int which = as_a ? 0 : 1;
        int r = ResultDimOf(*user, which, match.dim);
        if (r < 0) continue;  // contracted: left alone
        int other_dim = OperandDimOf(*user, 1 - which, r);
        int position = order.at(user);
        if (first < 0) first = position;
        if (!AvailableBefore(user->operand(1 - which), block, order, first)) continue;
        match.uses.push_back({user, which, r, other_dim});
        claimed.insert(user);
      }
      if (!match.uses.empty()) {
        match.assemble = OtherUsersFollow(match, block, order);
        out.gathers.push_back(std::move(match));
      }
      continue;
    }
    if (op->Is(OpKind::kReduceScatter) && IsCollectiveOnGroup(*op, mesh, &group)) {
      std::vector<Operation*> matmuls, adds;
      const bool sum = op->def().reduction_fn(op->attrs()) == ReductionFn::kSum;
      if (!SummedMatmuls(op->operand(0), block, claimed, sum, matmuls, adds)) continue;
      Operation* mm = matmuls.front();
      ScatterMatch match;
      match.matmul = mm;
      match.scatter = op;
      match.axes = op->attrs().Find("axis")->axes();
      match.group = group;
      int64_t dim = op->attrs().GetInt("dim", 0);
      if (dim < 0) dim += mm->result(0)->type().rank();
      match.result_dim = static_cast<int>(dim);
      match.full = mm->result(0)->type().dims()[dim];
      bool splittable = true;
      for (Operation* term : matmuls) {
        ScatterMatch::Term t{term, {-1, -1}};
        for (int w = 0; w < 2; ++w) t.operand_dim[w] = OperandDimOf(*term, w, match.result_dim);
        // A batch dimension broadcast in both operands cannot be split.
        splittable &= t.operand_dim[0] >= 0 || t.operand_dim[1] >= 0;
        if (term == mm) {
          match.operand_dim[0] = t.operand_dim[0];
          match.operand_dim[1] = t.operand_dim[1];
        } else {
          match.more.push_back(t);
        }
      }
      if (!splittable) continue;
      match.adds = std::move(adds);
      for (Operation* term : matmuls) claimed.insert(term);
      out.scatters.push_back(std::move(match));
    }
  }
}

}  // namespace

CollectiveMatmulMatches FindCollectiveMatmuls(Function& function) {
  CollectiveMatmulMatches matches;
  if (function.is_spmd()) MatchBlock(function.body(), function.mesh(), matches);
  return matches;
}

Type WithDim(Type type, int64_t dim, int64_t size) {
  std::vector<int64_t> dims = type.dims();
  dims[dim] = size;
  return Type::Tensor(type.element_type(), std::move(dims));
}

Type SplitDim(Type type, int64_t dim, absl::Span<const int64_t> factors) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (d == dim) {
      dims.insert(dims.end(), factors.begin(), factors.end());
    } else {
      dims.push_back(type.dims()[d]);
    }
  }
  return Type::Tensor(type.element_type(), std::move(dims));
}

absl::StatusOr<Value*> Emit(OpBuilder& e, OpKind kind, absl::Span<const Operand> operands,
                            AttrDict attrs, absl::Span<const Type> result_types,
                            StreamChoice stream, const std::string& name) {
  if (stream.value == nullptr && (stream.fixed > 0 || stream.explicit_main)) {
    attrs.Set("stream", Attribute::Int(stream.fixed));
  }
  COMMIR_ASSIGN_OR_RETURN(Operation * op, e.Create(kind, operands, std::move(attrs), result_types));
  if (stream.value != nullptr) op->SetStreamOperand(stream.value);
  Value* v = op->result(0);
  v->set_name(name);
  return v;
}

AttrDict ZeroAttrs(Type type) {
  AttrDict attrs;
  attrs.Set("value",
            IsIntegerType(type.element_type()) ? Attribute::Int(0) : Attribute::Float(0.0));
  return attrs;
}

AttrDict DimAttrs(int64_t dim) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(dim));
  return attrs;
}

AttrDict AxisDimAttrs(const AxisList& axes, int64_t dim) {
  AttrDict attrs = sharding::AxisAttrs(axes);
  attrs.Set("dim", Attribute::Int(dim));
  return attrs;
}

absl::StatusOr<Value*> SliceDim(OpBuilder& e, Value* x, int64_t dim, int64_t size, Value* offset,
                                StreamChoice stream, const std::string& name) {
  AttrDict attrs = DimAttrs(dim);
  attrs.Set("size", Attribute::Int(size));
  return Emit(e, OpKind::kDynamicSlice, {x, offset}, std::move(attrs), {}, stream, name);
}

absl::StatusOr<Value*> EmitMatmul(OpBuilder& e, const Operation& original, Value* a, Value* b,
                                  Type result, StreamChoice stream, const std::string& name) {
  Type types[] = {result};
  return Emit(e, OpKind::kMatmul, {a, b}, original.attrs(), types, stream, name);
}

absl::StatusOr<Value*> ScaleIndex(OpBuilder& e, Value* index, int64_t factor,
                                  const std::string& name) {
  if (factor == 1) return index;
  return Emit(e, OpKind::kMul,
              {index, Operand::Literal(static_cast<double>(factor), Type::Index())}, {}, {}, {},
              name);
}

absl::StatusOr<Value*> RingIndex(OpBuilder& e, Value* rank, Value* delta, bool subtract,
                                 int64_t constant, int64_t n, const std::string& name) {
  Value* v = rank;
  if (delta != nullptr) {
    COMMIR_ASSIGN_OR_RETURN(
        v, Emit(e, subtract ? OpKind::kSub : OpKind::kAdd, {v, delta}, {}, {}, {}, name + "_raw"));
  }
  constant = ((constant % n) + n) % n;
  if (constant != 0) {
    COMMIR_ASSIGN_OR_RETURN(
        v, Emit(e, OpKind::kAdd, {v, Operand::Literal(static_cast<double>(constant), Type::Index())},
                {}, {}, {}, delta != nullptr ? name + "_sum" : name + "_raw"));
  }
  if (v == rank) return rank;
  return Emit(e, OpKind::kRem, {v, Operand::Literal(static_cast<double>(n), Type::Index())}, {}, {},
              {}, name);
}

std::string ResultName(const Operation& op) { return op.result(0)->name(); }

}  // namespace commir::schedules::cmm
