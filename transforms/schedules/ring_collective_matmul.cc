#include "transforms/schedules/ring_collective_matmul.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "commir/status_macros.h"
#include "transforms/schedules/collective_matmul.h"

namespace commir::schedules {
namespace {

using cmm::AxisDimAttrs;
using cmm::CreateLoop;
using cmm::DimAttrs;
using cmm::Emit;
using cmm::EmitMatmul;
using cmm::GatherMatch;
using cmm::GatherUse;
using cmm::Loop;
using cmm::Operand;
using cmm::ResultName;
using cmm::RingIndex;
using cmm::ScaleIndex;
using cmm::ScatterMatch;
using cmm::SliceDim;
using cmm::SplitDim;
using cmm::StreamChoice;
using cmm::WithDim;
using cmm::Yield;
using cmm::ZeroAttrs;

constexpr int64_t kForwardStream = 1;
constexpr int64_t kBackwardStream = 2;

AttrDict ShiftAttrs(const AxisList& axes, int64_t offset) {
  AttrDict attrs = sharding::AxisAttrs(axes);
  attrs.Set("offset", Attribute::Int(offset));
  return attrs;
}

std::string NameOr(const Value* v, absl::string_view fallback) {
  return v->name().empty() ? std::string(fallback) : v->name();
}

// `index + constant` (or `index` itself when the constant is 0).
absl::StatusOr<Value*> AddConstant(OpBuilder& e, Value* index, int64_t constant,
                                   const std::string& name) {
  if (constant == 0) return index;
  return Emit(e, OpKind::kAdd,
              {index, Operand::Literal(static_cast<double>(constant), Type::Index())}, {}, {}, {},
              name);
}

// `x`'s `size` entries along `dim` from the constant `offset` (a static `slice`).
absl::StatusOr<Value*> SliceAt(OpBuilder& e, Value* x, int64_t dim, int64_t size, int64_t offset,
                               const std::string& name) {
  std::vector<int64_t> starts(static_cast<size_t>(x->type().rank()), 0);
  std::vector<int64_t> sizes = x->type().dims();
  starts[static_cast<size_t>(dim)] = offset;
  sizes[static_cast<size_t>(dim)] = size;
  AttrDict attrs;
  attrs.Set("start", Attribute::IntList(starts));
  attrs.Set("size", Attribute::IntList(sizes));
  return Emit(e, OpKind::kSlice, {x}, std::move(attrs), {}, {}, name);
}

class Ring : public cmm::ReplacedOps {
 public:
  Ring(Function& function, RingDirection direction, ScatterForm scatter_form)
      : function_(function), direction_(direction), scatter_form_(scatter_form) {}

  // The device's coordinate along `axes`: one `rank` per axis group, at the top of the
  // function so that every rewritten pair can use it.
  absl::StatusOr<Value*> Rank(const AxisList& axes, Location loc) {
    auto it = ranks_.find(axes);
    if (it != ranks_.end()) return it->second;
    OpBuilder top(&function_, function_.body(), function_.body()->front());
    top.set_loc(loc);
    absl::StatusOr<Value*> rank =
        Emit(top, OpKind::kRank, {}, sharding::AxisAttrs(axes), {}, {}, "r");
    if (rank.ok()) ranks_[axes] = *rank;
    return rank;
  }

  // ---- all_gather + GEMM ------------------------------------------------------------

  // Multiplies the block `blk` that came from device `src` into every accumulator. A
  // half-block (`size` = m/2) of the bidirectional ring starts `extra` rows into it.
  absl::StatusOr<std::vector<Value*>> GatherStep(OpBuilder& e, const GatherMatch& m, Value* blk,
                                                 Value* src, const std::vector<Value*>& accs,
                                                 int64_t size = 0, int64_t extra = 0) {
    if (size == 0) size = m.local;
    COMMIR_ASSIGN_OR_RETURN(Value* start, ScaleIndex(e, src, m.local, "off"));
    COMMIR_ASSIGN_OR_RETURN(Value* off, AddConstant(e, start, extra, "off_half"));
    std::vector<Value*> next;
    for (size_t k = 0; k < m.uses.size(); ++k) {
      const GatherUse& u = m.uses[k];
      Operation* mm = u.matmul;
      Value* other = mm->operand(1 - u.operand);
      if (u.other_dim >= 0) {
        COMMIR_ASSIGN_OR_RETURN(Value* sl, SliceDim(e, other, u.other_dim, size, off, {},
                                             absl::StrCat(NameOr(other, "w"), "_blk")));
        other = sl;
      }
      Value* lhs = u.operand == 0 ? blk : other;
      Value* rhs = u.operand == 0 ? other : blk;
      Type result = mm->result(0)->type();
      COMMIR_ASSIGN_OR_RETURN(
          Value* part, EmitMatmul(e, *mm, lhs, rhs, WithDim(result, u.result_dim, size), {},
                           absl::StrCat(ResultName(*mm), "_blk")));
      COMMIR_ASSIGN_OR_RETURN(
          Value* acc, Emit(e, OpKind::kDynamicUpdateSlice, {accs[k], part, off}, DimAttrs(u.result_dim),
                    {}, {}, absl::StrCat(ResultName(*mm), "_acc")));
      next.push_back(acc);
    }
    if (m.assemble) {
      // The whole gathered value for the gather's other users: the block in place.
      COMMIR_ASSIGN_OR_RETURN(
          Value* whole, Emit(e, OpKind::kDynamicUpdateSlice, {accs.back(), blk, off},
                             DimAttrs(m.dim), {}, {}, AssembledName(m) + "_acc"));
      next.push_back(whole);
    }
    return next;
  }

  static std::string AssembledName(const GatherMatch& m) {
    return NameOr(m.gather->result(0), "gathered");
  }

  // The names of the loop-carried accumulators: one per matched matmul, and the
  // assembled gathered value.
  static std::vector<std::string> AccumulatorNames(const GatherMatch& m) {
    std::vector<std::string> names;
    for (const GatherUse& u : m.uses) names.push_back(absl::StrCat(ResultName(*u.matmul), "_acc"));
    if (m.assemble) names.push_back(AssembledName(m) + "_acc");
    return names;
  }

  absl::Status RewriteGather(const GatherMatch& m) {
    Operation* gather = m.gather;
    Operation* first = m.uses.front().matmul;
    Block* block = first->parent_block();
    Value* x = gather->operand(0);
    const int64_t n = m.group;
    const std::string blk_name = absl::StrCat(NameOr(x, "x"), "_blk");
    OpBuilder e(&function_, block, first);
    e.set_loc(gather->loc());
    COMMIR_ASSIGN_OR_RETURN(Value* rank, Rank(m.axes, gather->loc()));
    std::vector<Value*> accs;
    for (const GatherUse& u : m.uses) {
      Type t = u.matmul->result(0)->type();
      COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(t), {&t, 1}, {},
                                         absl::StrCat(ResultName(*u.matmul), "_init")));
      accs.push_back(zero);
    }
    if (m.assemble) {
      Type t = gather->result(0)->type();
      COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(t), {&t, 1}, {},
                                                AssembledName(m) + "_init"));
      accs.push_back(zero);
    }
    absl::StatusOr<std::vector<Value*>> done;
    if (direction_ == RingDirection::kUni) {
      // Steps 0 .. n-2: send the held block on while multiplying it.
      std::vector<Value*> inits = accs;
      inits.push_back(x);
      std::vector<std::string> names = AccumulatorNames(m);
      names.push_back(blk_name);
      Loop loop = CreateLoop(block, first, gather->loc(), 0, n - 1, inits, names);
      OpBuilder b(&function_, loop.body, nullptr);
      b.set_loc(gather->loc());
      Value* blk = loop.carried.back();
      COMMIR_ASSIGN_OR_RETURN(Value* next, Emit(b, OpKind::kShift, {blk}, ShiftAttrs(m.axes, 1), {},
                                         {nullptr, kForwardStream}, blk_name + "_next"));
      COMMIR_ASSIGN_OR_RETURN(Value* src, RingIndex(b, rank, loop.iv, true, 0, n, "src"));
      std::vector<Value*> held(loop.carried.begin(), loop.carried.end() - 1);
      COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> yields, GatherStep(b, m, blk, src, held));
      yields.push_back(next);
      Yield(loop, yields);
      // The last step (s = n-1, block of rank + 1) only multiplies.
      for (size_t k = 0; k < m.uses.size(); ++k) {
        loop.op->result(static_cast<int>(k))
            ->set_name(absl::StrCat(ResultName(*m.uses[k].matmul), "_part"));
      }
      if (m.assemble) {
        loop.op->result(static_cast<int>(m.uses.size()))->set_name(AssembledName(m) + "_part");
      }
      loop.op->result(static_cast<int>(accs.size()))->set_name(blk_name + "_last");
      std::vector<Value*> after = loop.op->results();
      Value* last = after.back();
      after.pop_back();
      COMMIR_ASSIGN_OR_RETURN(Value* last_src, RingIndex(e, rank, nullptr, false, 1, n, "src_last"));
      done = GatherStep(e, m, last, last_src, after);
    } else if (m.local % 2 == 0) {
      done = HalfBlockGather(e, m, rank, x, accs, blk_name);
    } else {
      done = BidirectionalGather(e, m, rank, x, accs, blk_name);
    }
    COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> outs, std::move(done));
    for (size_t k = 0; k < m.uses.size(); ++k) {
      Operation* mm = m.uses[k].matmul;
      Value* out = outs[k];
      out->set_name(ResultName(*mm));
      mm->result(0)->ReplaceAllUsesWith(out);
      Add(mm);
    }
    if (m.assemble) {
      outs.back()->set_name(AssembledName(m));
      gather->result(0)->ReplaceAllUsesWith(outs.back());
    }
    // Dead once the matched matmuls (one use each) go, and the other users read the
    // assembled value.
    if (gather->result(0)->users().size() == m.uses.size() || m.assemble) Add(gather);
    return absl::OkStatus();
  }

  struct TwoWayLoopResult {
    std::vector<Value*> accs;  // the accumulators after the loop
    Value* fwd = nullptr;      // the blocks held after the loop's last step
    Value* bwd = nullptr;
  };

  // The loop of a two-way ring, steps `lower` .. `upper` - 1: each step sends the held
  // forward block on (stream 1, offset +1) and the backward block back (stream 2, offset
  // -1) while multiplying both into the accumulators. `size` rows of each block are
  // multiplied (0: the whole block), the backward one `bwd_extra` rows into its source's
  // block. The loop's block results are named `fwd_name`/`bwd_name` + `held_suffix`.
  absl::StatusOr<TwoWayLoopResult> TwoWayGatherLoop(const GatherMatch& m, Value* rank,
                                                    const std::vector<Value*>& accs,
                                                    Value* fwd, Value* bwd, int64_t lower,
                                                    int64_t upper, int64_t size,
                                                    int64_t bwd_extra,
                                                    const std::string& fwd_name,
                                                    const std::string& bwd_name,
                                                    absl::string_view held_suffix) {
    const int64_t n = m.group;
    const AxisList& axes = m.axes;
    std::vector<Value*> inits = accs;
    inits.push_back(fwd);
    inits.push_back(bwd);
    std::vector<std::string> names = AccumulatorNames(m);
    names.push_back(fwd_name);
    names.push_back(bwd_name);
    Loop loop = CreateLoop(BlockOf(m), m.uses.front().matmul, m.gather->loc(), lower, upper,
                           inits, names);
    OpBuilder b(&function_, loop.body, nullptr);
    b.set_loc(m.gather->loc());
    Value* lf = loop.carried[accs.size()];
    Value* lg = loop.carried[accs.size() + 1];
    COMMIR_ASSIGN_OR_RETURN(Value* nf, Emit(b, OpKind::kShift, {lf}, ShiftAttrs(axes, 1), {},
                                     {nullptr, kForwardStream}, fwd_name + "_next"));
    COMMIR_ASSIGN_OR_RETURN(Value* ng, Emit(b, OpKind::kShift, {lg}, ShiftAttrs(axes, -1), {},
                                     {nullptr, kBackwardStream}, bwd_name + "_next"));
    COMMIR_ASSIGN_OR_RETURN(Value* sf, RingIndex(b, rank, loop.iv, true, 0, n, "src_fwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* sb, RingIndex(b, rank, loop.iv, false, 0, n, "src_bwd"));
    std::vector<Value*> held(loop.carried.begin(), loop.carried.begin() + accs.size());
    COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> s1, GatherStep(b, m, lf, sf, held, size, 0));
    COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> yields, GatherStep(b, m, lg, sb, s1, size, bwd_extra));
    yields.push_back(nf);
    yields.push_back(ng);
    Yield(loop, yields);
    for (size_t k = 0; k < m.uses.size(); ++k) {
      loop.op->result(static_cast<int>(k))
          ->set_name(absl::StrCat(ResultName(*m.uses[k].matmul), "_part"));
    }
    if (m.assemble) {
      loop.op->result(static_cast<int>(m.uses.size()))->set_name(AssembledName(m) + "_part");
    }
    loop.op->result(static_cast<int>(accs.size()))->set_name(absl::StrCat(fwd_name, held_suffix));
    loop.op->result(static_cast<int>(accs.size()) + 1)
        ->set_name(absl::StrCat(bwd_name, held_suffix));
    std::vector<Value*> results = loop.op->results();
    TwoWayLoopResult out;
    out.accs.assign(results.begin(), results.begin() + accs.size());
    out.fwd = results[accs.size()];
    out.bwd = results[accs.size() + 1];
    return out;
  }

  // bi with an even block: the first half of every block travels forward (stream 1), the
  // second half backward (stream 2). Steps 0 .. n-2 loop: send both held halves on while
  // multiplying them; the last step (halves of rank + 1 and rank - 1) sends nothing.
  absl::StatusOr<std::vector<Value*>> HalfBlockGather(OpBuilder& e, const GatherMatch& m,
                                                      Value* rank, Value* x,
                                                      std::vector<Value*> accs,
                                                      const std::string& blk_name) {
    const int64_t n = m.group;
    const int64_t half = m.local / 2;
    const std::string fwd_name = blk_name + "_fwd", bwd_name = blk_name + "_bwd";
    COMMIR_ASSIGN_OR_RETURN(Value* lo, SliceAt(e, x, m.dim, half, 0, NameOr(x, "x") + "_lo"));
    COMMIR_ASSIGN_OR_RETURN(Value* hi, SliceAt(e, x, m.dim, half, half, NameOr(x, "x") + "_hi"));
    COMMIR_ASSIGN_OR_RETURN(
        TwoWayLoopResult loop,
        TwoWayGatherLoop(m, rank, accs, lo, hi, 0, n - 1, half, half, fwd_name, bwd_name, "_last"));
    accs = loop.accs;
    COMMIR_ASSIGN_OR_RETURN(Value* lf_src, RingIndex(e, rank, nullptr, false, 1, n, "src_fwd_last"));
    COMMIR_ASSIGN_OR_RETURN(Value* lg_src, RingIndex(e, rank, nullptr, false, -1, n, "src_bwd_last"));
    COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> t1, GatherStep(e, m, loop.fwd, lf_src, accs, half, 0));
    return GatherStep(e, m, loop.bwd, lg_src, t1, half, half);
  }

  absl::StatusOr<std::vector<Value*>> BidirectionalGather(OpBuilder& e, const GatherMatch& m,
                                                          Value* rank, Value* x,
                                                          std::vector<Value*> accs,
                                                          const std::string& blk_name) {
    const int64_t n = m.group;
    const int64_t h = (n - 1) / 2;  // rounds that receive from both sides
    const int64_t rounds = n / 2;   // ceil((n-1)/2): shift rounds in all
    const AxisList& axes = m.axes;
    const std::string fwd_name = blk_name + "_fwd", bwd_name = blk_name + "_bwd";
    // Step 0: send the own block both ways, multiply it.
    COMMIR_ASSIGN_OR_RETURN(Value* f, Emit(e, OpKind::kShift, {x}, ShiftAttrs(axes, 1), {},
                                    {nullptr, kForwardStream}, fwd_name));
    Value* g = nullptr;
    if (h >= 1) {
      COMMIR_ASSIGN_OR_RETURN(Value* g0, Emit(e, OpKind::kShift, {x}, ShiftAttrs(axes, -1), {},
                                       {nullptr, kBackwardStream}, bwd_name));
      g = g0;
    }
    COMMIR_ASSIGN_OR_RETURN(accs, GatherStep(e, m, x, rank, accs));
    // Steps 1 .. h-1: both ways, in a loop.
    if (h >= 2) {
      COMMIR_ASSIGN_OR_RETURN(
          TwoWayLoopResult loop,
          TwoWayGatherLoop(m, rank, accs, f, g, 1, h, 0, 0, fwd_name, bwd_name, "_held"));
      accs = loop.accs;
      f = loop.fwd;
      g = loop.bwd;
    }
    // Step h: the blocks of rank -/+ h; with n even the forward block goes one more hop.
    Value* f_last = nullptr;
    if (h >= 1) {
      if (rounds > h) {
        COMMIR_ASSIGN_OR_RETURN(Value* nf, Emit(e, OpKind::kShift, {f}, ShiftAttrs(axes, 1), {},
                                         {nullptr, kForwardStream}, fwd_name + "_last"));
        f_last = nf;
      }
      COMMIR_ASSIGN_OR_RETURN(Value* sf, RingIndex(e, rank, nullptr, false, -h, n, "src_fwd"));
      COMMIR_ASSIGN_OR_RETURN(Value* sb, RingIndex(e, rank, nullptr, false, h, n, "src_bwd"));
      COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> s1, GatherStep(e, m, f, sf, accs));
      COMMIR_ASSIGN_OR_RETURN(accs, GatherStep(e, m, g, sb, s1));
    } else {
      f_last = f;  // n = 2: the one block received is the opposite one
    }
    // Step `rounds` (n even): the opposite block, rank + n/2.
    if (rounds > h) {
      COMMIR_ASSIGN_OR_RETURN(Value* so, RingIndex(e, rank, nullptr, false, rounds, n, "src_opp"));
      absl::StatusOr<std::vector<Value*>> s = GatherStep(e, m, f_last, so, accs);
      if (!s.ok()) return s;
      accs = *s;
    }
    return accs;
  }

  static Block* BlockOf(const GatherMatch& m) { return m.uses.front().matmul->parent_block(); }

  // ---- GEMM + reduce_scatter --------------------------------------------------------

  // This device's addend for output block `blk` (an index): the operands indexing the
  // scattered dimension sliced to that block.
  // A half-block addend (`size` = half the block) starts `extra` rows into the block.
  absl::StatusOr<Value*> Addend(OpBuilder& e, const ScatterMatch& m, Value* blk,
                                const std::string& name, int64_t size = 0, int64_t extra = 0) {
    const int64_t block = m.full / m.group;
    if (size == 0) size = block;
    COMMIR_ASSIGN_OR_RETURN(Value* start, ScaleIndex(e, blk, block, name + "_off"));
    COMMIR_ASSIGN_OR_RETURN(Value* off, AddConstant(e, start, extra, name + "_off_half"));
    const bool summed = !m.more.empty();
    COMMIR_ASSIGN_OR_RETURN(Value* addend, TermAddend(e, m, m.matmul, m.operand_dim, off, size,
                                                      summed ? name + "_term" : name));
    // A sum of matmuls: the sum of their blocks.
    for (size_t t = 0; t < m.more.size(); ++t) {
      COMMIR_ASSIGN_OR_RETURN(Value* term, TermAddend(e, m, m.more[t].matmul, m.more[t].operand_dim,
                                                      off, size, name + "_term"));
      const bool last = t + 1 == m.more.size();
      COMMIR_ASSIGN_OR_RETURN(addend, Emit(e, OpKind::kAdd, {addend, term}, {}, {}, {},
                                           last ? name : name + "_sum"));
    }
    return addend;
  }

  // Matmul `mm`'s rows [off, off + size) of the scattered dimension.
  absl::StatusOr<Value*> TermAddend(OpBuilder& e, const ScatterMatch& m, Operation* mm,
                                    const int (&operand_dim)[2], Value* off, int64_t size,
                                    const std::string& name) {
    Value* operands[2] = {mm->operand(0), mm->operand(1)};
    for (int w = 0; w < 2; ++w) {
      if (operand_dim[w] < 0) continue;
      COMMIR_ASSIGN_OR_RETURN(Value* sl, SliceDim(e, operands[w], operand_dim[w], size, off, {},
                                           absl::StrCat(NameOr(operands[w], "x"), "_blk")));
      operands[w] = sl;
    }
    return EmitMatmul(e, *mm, operands[0], operands[1],
                      WithDim(mm->result(0)->type(), m.result_dim, size), {}, name);
  }

  absl::StatusOr<Value*> Combine(OpBuilder& e, const ScatterMatch& m, Value* a, Value* b,
                                 const std::string& name) {
    const ReductionFn reduce = m.scatter->def().reduction_fn(m.scatter->attrs());
    OpKind kind = reduce == ReductionFn::kMax   ? OpKind::kMax
                  : reduce == ReductionFn::kMin ? OpKind::kMin
                                                : OpKind::kAdd;
    return Emit(e, kind, {a, b}, {}, {}, {}, name);
  }

  absl::Status RewriteScatter(const ScatterMatch& m) {
    Operation* scatter = m.scatter;
    Block* block = scatter->parent_block();
    const int64_t n = m.group;
    const std::string name = NameOr(scatter->result(0), "y");
    OpBuilder e(&function_, block, scatter);
    e.set_loc(scatter->loc());
    COMMIR_ASSIGN_OR_RETURN(Value* rank, Rank(m.axes, scatter->loc()));
    Value* result = nullptr;
    const std::optional<OpKind> owner_reduce = OwnerReduceKind(m);
    if (scatter_form_ == ScatterForm::kOwner && owner_reduce.has_value()) {
      COMMIR_ASSIGN_OR_RETURN(result, OwnerScatter(e, m, rank, *owner_reduce, name));
    } else if (direction_ == RingDirection::kUni) {
      // Step 0: the addend for block rank - 1, the start of its accumulator.
      COMMIR_ASSIGN_OR_RETURN(Value* b0, RingIndex(e, rank, nullptr, false, -1, n, "dst"));
      COMMIR_ASSIGN_OR_RETURN(Value* a0, Addend(e, m, b0, name + "_part"));
      Value* inits[] = {a0};
      std::string names[] = {name + "_acc"};
      Loop loop = CreateLoop(block, scatter, scatter->loc(), 1, n, inits, names);
      OpBuilder b(&function_, loop.body, nullptr);
      b.set_loc(scatter->loc());
      COMMIR_ASSIGN_OR_RETURN(Value* recv,
                              Emit(b, OpKind::kShift, {loop.carried[0]}, ShiftAttrs(m.axes, 1), {},
                                   {nullptr, kForwardStream}, name + "_recv"));
      COMMIR_ASSIGN_OR_RETURN(Value* dst, RingIndex(b, rank, loop.iv, true, -1, n, "dst"));
      COMMIR_ASSIGN_OR_RETURN(Value* part, Addend(b, m, dst, name + "_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* sum, Combine(b, m, recv, part, name + "_next"));
      Value* yields[] = {sum};
      Yield(loop, yields);
      result = loop.op->result(0);
    } else if ((m.full / n) % 2 == 0) {
      COMMIR_ASSIGN_OR_RETURN(result, HalfBlockScatter(e, m, rank, name));
    } else {
      COMMIR_ASSIGN_OR_RETURN(result, BidirectionalScatter(e, m, rank, name));
    }
    result->set_name(name);
    scatter->result(0)->ReplaceAllUsesWith(result);
    Add(scatter);
    for (Operation* add : m.adds) Add(add);
    Add(m.matmul);
    for (const ScatterMatch::Term& t : m.more) Add(t.matmul);
    return absl::OkStatus();
  }

  // The reduction that sums the owner form's slots in one kernel: reduce_sum or
  // reduce_max; none for `min` (CommIR has no reduce_min), which keeps the ring form.
  static std::optional<OpKind> OwnerReduceKind(const ScatterMatch& m) {
    switch (m.scatter->def().reduction_fn(m.scatter->attrs())) {
      case ReductionFn::kSum: return OpKind::kReduceSum;
      case ReductionFn::kMax: return OpKind::kReduceMax;
      default: return std::nullopt;
    }
  }

  // rs=owner (ring_collective_matmul.h): step s = 1 .. n-1 computes the addend for block
  // (rank + s) mod n and sends it straight to its owner (shift by s), which receives it
  // into slot s-1 of a buffer of the matmul's result shape; the own addend comes last,
  // into slot n-1, overlapping the last transfer; one reduction over the n slots ends it.
  absl::StatusOr<Value*> OwnerScatter(OpBuilder& e, const ScatterMatch& m, Value* rank,
                                      OpKind reduce, const std::string& name) {
    const int64_t n = m.group;
    const int64_t block = m.full / n;
    const Type whole = m.scatter->operand(0)->type().WithoutSharding();
    COMMIR_ASSIGN_OR_RETURN(Value* slots, Emit(e, OpKind::kFull, {}, ZeroAttrs(whole), {&whole, 1},
                                               {}, name + "_slots_init"));
    // A slot's offset, an index constant defined before the block that lands there (so
    // the shift can receive into it and the GEMM write into it: runtime/in_place.h).
    auto slot_offset = [&](int64_t slot) -> absl::StatusOr<Value*> {
      AttrDict value;
      value.Set("value", Attribute::Int(slot * block));
      Type index = Type::Index();
      return Emit(e, OpKind::kFull, {}, std::move(value), {&index, 1}, {}, name + "_slot");
    };
    auto place = [&](Value* part, Value* offset) -> absl::StatusOr<Value*> {
      return Emit(e, OpKind::kDynamicUpdateSlice, {slots, part, offset}, DimAttrs(m.result_dim),
                  {}, {}, name + "_slots");
    };
    for (int64_t s = 1; s < n; ++s) {
      COMMIR_ASSIGN_OR_RETURN(Value* offset, slot_offset(s - 1));
      COMMIR_ASSIGN_OR_RETURN(Value* dst, RingIndex(e, rank, nullptr, false, s, n, "dst"));
      COMMIR_ASSIGN_OR_RETURN(Value* part, Addend(e, m, dst, name + "_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* recv, Emit(e, OpKind::kShift, {part}, ShiftAttrs(m.axes, s), {},
                                                {nullptr, kForwardStream}, name + "_recv"));
      COMMIR_ASSIGN_OR_RETURN(slots, place(recv, offset));
    }
    COMMIR_ASSIGN_OR_RETURN(Value* own_offset, slot_offset(n - 1));
    COMMIR_ASSIGN_OR_RETURN(Value* own, Addend(e, m, rank, name + "_own"));
    COMMIR_ASSIGN_OR_RETURN(slots, place(own, own_offset));
    Type split[] = {SplitDim(whole, m.result_dim, {n, block})};
    COMMIR_ASSIGN_OR_RETURN(Value* view, Emit(e, OpKind::kReshape, {slots}, {}, split, {},
                                              name + "_chunks"));
    AttrDict dims;
    dims.Set("dims", Attribute::IntList({static_cast<int64_t>(m.result_dim)}));
    return Emit(e, reduce, {view}, std::move(dims), {}, {}, name);
  }

  // bi with an even block: the first half of every block is summed by an accumulator
  // travelling forward (stream 1), the second half by one travelling backward (stream 2),
  // each a one-way ring of n-1 shifts; the two halves of the own block are joined at the
  // end (one concat of the device's output block).
  absl::StatusOr<Value*> HalfBlockScatter(OpBuilder& e, const ScatterMatch& m, Value* rank,
                                          const std::string& name) {
    const int64_t n = m.group;
    const int64_t half = m.full / n / 2;
    const AxisList& axes = m.axes;
    // Step 0: the addends for the halves of blocks rank - 1 and rank + 1.
    COMMIR_ASSIGN_OR_RETURN(Value* df, RingIndex(e, rank, nullptr, false, -1, n, "dst_fwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* pf, Addend(e, m, df, name + "_fwd_part", half, 0));
    COMMIR_ASSIGN_OR_RETURN(Value* db, RingIndex(e, rank, nullptr, false, 1, n, "dst_bwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* pb, Addend(e, m, db, name + "_bwd_part", half, half));
    Value* inits[] = {pf, pb};
    std::string names[] = {name + "_fwd_acc", name + "_bwd_acc"};
    Loop loop = CreateLoop(m.scatter->parent_block(), m.scatter, m.scatter->loc(), 1, n, inits,
                           names);
    OpBuilder b(&function_, loop.body, nullptr);
    b.set_loc(m.scatter->loc());
    COMMIR_ASSIGN_OR_RETURN(Value* rf, Emit(b, OpKind::kShift, {loop.carried[0]}, ShiftAttrs(axes, 1),
                                     {}, {nullptr, kForwardStream}, name + "_fwd_recv"));
    COMMIR_ASSIGN_OR_RETURN(Value* rb, Emit(b, OpKind::kShift, {loop.carried[1]}, ShiftAttrs(axes, -1),
                                     {}, {nullptr, kBackwardStream}, name + "_bwd_recv"));
    // Step s: the halves of blocks rank - s - 1 and rank + s + 1 (rank itself at s = n-1).
    COMMIR_ASSIGN_OR_RETURN(Value* tf, RingIndex(b, rank, loop.iv, true, -1, n, "dst_fwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* tb, RingIndex(b, rank, loop.iv, false, 1, n, "dst_bwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* qf, Addend(b, m, tf, name + "_fwd_part", half, 0));
    COMMIR_ASSIGN_OR_RETURN(Value* qb, Addend(b, m, tb, name + "_bwd_part", half, half));
    COMMIR_ASSIGN_OR_RETURN(Value* sf, Combine(b, m, rf, qf, name + "_fwd_next"));
    COMMIR_ASSIGN_OR_RETURN(Value* sb, Combine(b, m, rb, qb, name + "_bwd_next"));
    Value* yields[] = {sf, sb};
    Yield(loop, yields);
    loop.op->result(0)->set_name(name + "_lo");
    loop.op->result(1)->set_name(name + "_hi");
    AttrDict attrs = DimAttrs(m.result_dim);
    return Emit(e, OpKind::kConcat, {loop.op->result(0), loop.op->result(1)}, std::move(attrs),
                {}, {}, name);
  }

  absl::StatusOr<Value*> BidirectionalScatter(OpBuilder& e, const ScatterMatch& m, Value* rank,
                                              const std::string& name) {
    const int64_t n = m.group;
    const int64_t h1 = n / 2;        // devices collected forward, ceil((n-1)/2)
    const int64_t h2 = (n - 1) / 2;  // devices collected backward
    const AxisList& axes = m.axes;
    // Step 0: start both accumulators and send them.
    COMMIR_ASSIGN_OR_RETURN(Value* df, RingIndex(e, rank, nullptr, false, h1, n, "dst_fwd"));
    COMMIR_ASSIGN_OR_RETURN(Value* pf, Addend(e, m, df, name + "_fwd_part"));
    COMMIR_ASSIGN_OR_RETURN(Value* rf0, Emit(e, OpKind::kShift, {pf}, ShiftAttrs(axes, 1), {},
                                      {nullptr, kForwardStream}, name + "_fwd_recv"));
    Value* rf = rf0;
    Value* rb = nullptr;
    if (h2 >= 1) {
      COMMIR_ASSIGN_OR_RETURN(Value* db, RingIndex(e, rank, nullptr, false, -h2, n, "dst_bwd"));
      COMMIR_ASSIGN_OR_RETURN(Value* pb, Addend(e, m, db, name + "_bwd_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* rb0, Emit(e, OpKind::kShift, {pb}, ShiftAttrs(axes, -1), {},
                                        {nullptr, kBackwardStream}, name + "_bwd_recv"));
      rb = rb0;
    }
    // Steps 1 .. h2-1: add to both and pass them on.
    if (h2 >= 2) {
      Value* inits[] = {rf, rb};
      std::string names[] = {name + "_fwd", name + "_bwd"};
      Loop loop =
          CreateLoop(m.scatter->parent_block(), m.scatter, m.scatter->loc(), 1, h2, inits, names);
      OpBuilder b(&function_, loop.body, nullptr);
      b.set_loc(m.scatter->loc());
      // Forward block rank + h1 - s, backward block rank + s - h2.
      COMMIR_ASSIGN_OR_RETURN(Value* tf, RingIndex(b, rank, loop.iv, true, h1, n, "dst_fwd"));
      COMMIR_ASSIGN_OR_RETURN(Value* tb, RingIndex(b, rank, loop.iv, false, -h2, n, "dst_bwd"));
      COMMIR_ASSIGN_OR_RETURN(Value* qf, Addend(b, m, tf, name + "_fwd_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* qb, Addend(b, m, tb, name + "_bwd_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* sf, Combine(b, m, loop.carried[0], qf, name + "_fwd_sum"));
      COMMIR_ASSIGN_OR_RETURN(Value* sb, Combine(b, m, loop.carried[1], qb, name + "_bwd_sum"));
      COMMIR_ASSIGN_OR_RETURN(Value* nf, Emit(b, OpKind::kShift, {sf}, ShiftAttrs(axes, 1), {},
                                       {nullptr, kForwardStream}, name + "_fwd_next"));
      COMMIR_ASSIGN_OR_RETURN(Value* nb, Emit(b, OpKind::kShift, {sb}, ShiftAttrs(axes, -1), {},
                                       {nullptr, kBackwardStream}, name + "_bwd_next"));
      Value* yields[] = {nf, nb};
      Yield(loop, yields);
      rf = loop.op->result(0);
      rb = loop.op->result(1);
      rf->set_name(name + "_fwd_held");
      rb->set_name(name + "_bwd_held");
    }
    // With n even the forward accumulator collects one device more (s = h2).
    if (h1 > h2 && h2 >= 1) {
      COMMIR_ASSIGN_OR_RETURN(Value* tf, RingIndex(e, rank, nullptr, false, h1 - h2, n, "dst_fwd"));
      COMMIR_ASSIGN_OR_RETURN(Value* qf, Addend(e, m, tf, name + "_fwd_part"));
      COMMIR_ASSIGN_OR_RETURN(Value* sf, Combine(e, m, rf, qf, name + "_fwd_sum"));
      COMMIR_ASSIGN_OR_RETURN(Value* nf, Emit(e, OpKind::kShift, {sf}, ShiftAttrs(axes, 1), {},
                                       {nullptr, kForwardStream}, name + "_fwd_recv"));
      rf = nf;
    }
    // Last step: the own addend plus what arrived from both sides.
    COMMIR_ASSIGN_OR_RETURN(Value* own, Addend(e, m, rank, name + "_own"));
    COMMIR_ASSIGN_OR_RETURN(Value* total, Combine(e, m, own, rf, rb != nullptr ? name + "_half" : name));
    if (rb == nullptr) return total;
    return Combine(e, m, total, rb, name);
  }

 private:
  Function& function_;
  RingDirection direction_;
  ScatterForm scatter_form_;
  absl::flat_hash_map<AxisList, Value*> ranks_;
};

}  // namespace

absl::StatusOr<int> RingCollectiveMatmul(Module& module, RingDirection direction,
                                         ScatterForm scatter_form) {
  int rewritten = 0;
  for (Function* function : module.functions()) {
    cmm::CollectiveMatmulMatches matches = cmm::FindCollectiveMatmuls(*function);
    Ring ring(*function, direction, scatter_form);
    if (absl::Status s = cmm::RewriteMatches(ring, matches, &rewritten); !s.ok()) return s;
  }
  return rewritten;
}

const OptionSchema<RingCollectiveMatmulOptions>& RingCollectiveMatmulOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<RingCollectiveMatmulOptions>())
           .Enum("direction", &RingCollectiveMatmulOptions::direction,
                 {{"uni", RingDirection::kUni}, {"bi", RingDirection::kBi}},
                 "uni: n-1 steps one way; bi: half-blocks both ways, n-1 steps of half the bytes "
                 "(odd blocks: whole blocks both ways, ceil((n-1)/2) steps)")
           .Enum("rs", &RingCollectiveMatmulOptions::scatter_form,
                 {{"owner", ScatterForm::kOwner}, {"ring", ScatterForm::kRing}},
                 "GEMM + reduce_scatter. owner: each addend sent straight to the device that "
                 "owns its block, received into a slot, the n slots summed once at the end "
                 "(TransformerEngine's ring-exchange reduce-scatter); ring: an accumulator "
                 "passed around the ring, one add per step (follows `direction`)");
  return *schema;
}

const PassInfo& RingCollectiveMatmulPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<RingCollectiveMatmulPass>(
      "ring-collective-matmul",
      "Replace all_gather+matmul and matmul+reduce_scatter pairs by a ring of shifts "
      "overlapping the block GEMMs"));
  return *info;
}

absl::Status RingCollectiveMatmulPass::Run(Module& module) {
  absl::StatusOr<int> n =
      RingCollectiveMatmul(module, options().direction, options().scatter_form);
  if (!n.ok()) return n.status();
  ReportRewrites(*n, "Collective+matmul pairs rewritten to a ring of shifts",
                 absl::StrCat(cmm::kNoCollectiveMatmulPair, " ", InSpmdFunctions(module)));
  return absl::OkStatus();
}

}  // namespace commir::schedules
