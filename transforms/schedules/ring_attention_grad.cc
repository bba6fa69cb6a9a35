#include "transforms/schedules/ring_attention_grad.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/attention_op.h"
#include "commir/type.h"
#include "transforms/schedules/counted_loop.h"
#include "transforms/schedules/ring_zigzag.h"
#include "transforms/sharding/layout.h"

namespace commir::schedules {
namespace {

// As the forward ring (ring_attention.cc): stream 1, or stream 2 when axes stay gathered
// so that a ring over those (on stream 1) runs beside it.
constexpr int64_t kCommStream = 1;
constexpr int64_t kOuterCommStream = 2;

// What a step pairs with a key block: queries (or a zigzag chunk of them) with their
// output, output gradient, global lse and position.
struct QueryPart {
  Value* q = nullptr;
  Value* o = nullptr;
  Value* dout = nullptr;
  Value* lse = nullptr;
  Value* q_pos = nullptr;
};

// One block's gradients.
struct BlockGrad {
  Value* dq = nullptr;
  Value* dk = nullptr;
  Value* dv = nullptr;
};

class RingGrad {
 public:
  RingGrad(Function& function, const GatheredAttention& match)
      : function_(function), match_(match), op_(match.attention), n_(match.group_size),
        e_(&function, op_->parent_block(), op_, op_->loc()) {
    const AttentionGradOp view(*op_);
    q_ = view.q();
    o_ = view.o();
    lse_ = view.lse();
    dout_ = view.dout();
    q_pos_ = view.q_pos();
    k_base_ = view.k_pos();
    k_ = match.k_gather->operand(0);
    v_ = match.v_gather->operand(0);
    causal_ = view.causal();
    element_type_ = q_->type().element_type();
    compute_type_ = element_type_ == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
    attrs_ = op_->attrs();
    attrs_.Erase("stream");
    // Every step's lse is the global one (see the header).
    attrs_.Set("partial_keys", Attribute::Bool(true));
    block_ = k_->type().dims()[2] * match.rest_size;
  }

  absl::Status Run(bool zigzag, std::vector<Operation*>* rewritten,
                   std::vector<std::string>* skipped) {
    const int64_t queries = q_->type().dims()[2];
    if (causal_) {
      rank_ = FindOrMakeTopLevelRank(e_, op_, match_.axes);
      // attention_grad's default q_pos (keys - queries) counts in the gathered keys.
      if (q_pos_ == nullptr) q_pos_ = e_.IndexConstant(n_ * block_ - queries, "q_pos");
    }
    bool zigzag_ok = false;
    std::optional<Operand> query_base;
    if (zigzag && causal_) {
      query_base = QueryBase(AttentionGradOp(*op_).q_pos(), match_.axes, queries);
      std::string refusal = ZigzagRefusal(query_base, queries);
      zigzag_ok = refusal.empty();
      if (!zigzag_ok && skipped != nullptr) {
        skipped->push_back(absl::StrFormat("@%s: attention_grad at %d:%d: zigzag %s; contiguous "
                                           "ring used", function_.name(), op_->loc().line,
                                           op_->loc().col, refusal));
      }
    }
    if (zigzag_ok) {
      // Every per-query operand and k, v into the zigzag layout; the ring below is the
      // same, its blocks two chunks each (Step pairs them).
      zz_.emplace(e_, rank_, n_, match_.axes);
      const int64_t q_chunk = queries / 2;
      const int64_t kv_chunk = block_ / 2;
      q_ = zz_->ZigzagOf(q_, q_chunk, "q_zz");
      o_ = zz_->ZigzagOf(o_, q_chunk, "o_zz");
      lse_ = zz_->ZigzagOf(lse_, q_chunk, "lse_zz");
      dout_ = zz_->ZigzagOf(dout_, q_chunk, "dout_zz");
      k_ = zz_->ZigzagOf(k_, kv_chunk, "k_zz");
      v_ = zz_->ZigzagOf(v_, kv_chunk, "v_zz");
    }
    if (!zigzag_ok) {
      queries_ = {QueryPart{q_, o_, dout_, lse_, q_pos_}};
    } else {
      const int64_t c = queries / 2;
      Value* rank_pos = ChunkPosition(e_, rank_, c, *query_base, "q_pos_lo");
      Value* mirror_pos = ChunkPosition(e_, zz_->MirrorRank(), c, *query_base, "q_pos_hi");
      for (int h = 0; h < 2; ++h) {
        const char* half = h == 0 ? "_lo" : "_hi";
        queries_.push_back(QueryPart{SequenceSlice(e_, q_, h * c, c, absl::StrCat("q", half)),
                                     SequenceSlice(e_, o_, h * c, c, absl::StrCat("o", half)),
                                     SequenceSlice(e_, dout_, h * c, c, absl::StrCat("dout", half)),
                                     SequenceSlice(e_, lse_, h * c, c, absl::StrCat("lse", half)),
                                     h == 0 ? rank_pos : mirror_pos});
      }
    }

    // Step 0: the device's own block; the next k/v travel meanwhile.
    Value* kb = Shift(e_, k_, "k_step1");
    Value* vb = Shift(e_, v_, "v_step1");
    BlockGrad g = Step(e_, k_, v_, rank_);
    Value* dq = g.dq;
    Value* dk = Shift(e_, g.dk, "dk_step1");
    Value* dv = Shift(e_, g.dv, "dv_step1");
    if (n_ > 2 && e_.ok()) {
      CountedLoop loop = InsertCountedLoop(e_.block(), e_.before(), e_.loc(), 1, n_ - 1,
                                           {dq, kb, vb, dk, dv}, "step",
                                           {"dq_acc", "k_blk", "v_blk", "dk_acc", "dv_acc"});
      const char* names[] = {"dq_loop", "k_last", "v_last", "dk_last", "dv_last"};
      for (int i = 0; i < 5; ++i) loop.op->result(i)->set_name(names[i]);
      OpBuilder b(&function_, loop.body, nullptr, e_.loc());
      Value* k_next = Shift(b, loop.carried[1], "k_next");
      Value* v_next = Shift(b, loop.carried[2], "v_next");
      Value* source = causal_ ? SourceAt(b, loop.iv) : nullptr;
      BlockGrad part = Step(b, loop.carried[1], loop.carried[2], source);
      Value* dq_next = b.Op(OpKind::kAdd, {loop.carried[0], part.dq}, {}, std::nullopt, "dq_step");
      Value* dk_sum = b.Op(OpKind::kAdd, {loop.carried[3], part.dk}, {}, std::nullopt, "dk_step");
      Value* dv_sum = b.Op(OpKind::kAdd, {loop.carried[4], part.dv}, {}, std::nullopt, "dv_step");
      Value* dk_next = Shift(b, dk_sum, "dk_next");
      Value* dv_next = Shift(b, dv_sum, "dv_next");
      if (!b.ok()) return Failed(b.status());
      YieldFromLoop(loop, {dq_next, k_next, v_next, dk_next, dv_next}, e_.loc());
      dq = loop.op->result(0);
      kb = loop.op->result(1);
      vb = loop.op->result(2);
      dk = loop.op->result(3);
      dv = loop.op->result(4);
    }
    // Step n-1 holds block rank + 1; its completed accumulators go home.
    Value* source = causal_ ? LastSource(e_) : nullptr;
    BlockGrad last = Step(e_, kb, vb, source);
    dq = e_.Op(OpKind::kAdd, {dq, last.dq});
    Value* dk_home = Shift(e_, e_.Op(OpKind::kAdd, {dk, last.dk}), "dk_home");
    Value* dv_home = Shift(e_, e_.Op(OpKind::kAdd, {dv, last.dv}), "dv_home");
    Value* results[] = {e_.Convert(dq, element_type_), e_.Convert(dk_home, element_type_),
                        e_.Convert(dv_home, element_type_)};
    if (!e_.ok()) return Failed(e_.status());
    Value* replaced[] = {op_->result(0), match_.dk_scatter->result(0), match_.dv_scatter->result(0)};
    if (zz_.has_value()) {
      // Back to the contiguous layout, or straight into a zigzag result's exchange.
      const int64_t chunks[] = {q_->type().dims()[2] / 2, block_ / 2, block_ / 2};
      for (int i = 0; i < 3; ++i) {
        results[i] = zz_->ContiguousFor(replaced[i], results[i], chunks[i], rewritten);
      }
      if (!e_.ok()) return Failed(e_.status());
    }
    for (int i = 0; i < 3; ++i) {
      if (results[i] == nullptr) continue;  // every use took the zigzag value
      results[i]->set_name(replaced[i]->name());
      replaced[i]->ReplaceAllUsesWith(results[i]);
    }
    // Erased with their dead producers by the caller, with the other rewritten ones.
    rewritten->push_back(op_);
    rewritten->push_back(match_.dk_scatter);
    rewritten->push_back(match_.dv_scatter);
    return absl::OkStatus();
  }

 private:
  static absl::Status Failed(const absl::Status& status) {
    return absl::InternalError(absl::StrCat("ring-attention: ", status.message()));
  }

  Value* Shift(OpBuilder& e, Value* x, const std::string& name) {
    int64_t stream = match_.rest.empty() ? kCommStream : kOuterCommStream;
    return e.Op(OpKind::kShift, {x}, CollectiveAttrs(match_.axes, stream), std::nullopt, name);
  }

  // The held block, or with axes left gathered its rest group's blocks gathered into one
  // contiguous super-block (attention_match.h).
  Value* RestGathered(OpBuilder& e, Value* block, const char* name) {
    if (match_.rest.empty()) return block;
    AttrDict attrs = sharding::AxisAttrs(match_.rest);
    attrs.Set("dim", Attribute::Int(2));
    return e.Op(OpKind::kAllGather, {block}, std::move(attrs), std::nullopt, name);
  }

  // A super-block's gradient summed over the rest group, each device keeping its block's.
  Value* RestScattered(OpBuilder& e, Value* grad, const char* name) {
    if (match_.rest.empty()) return grad;
    AttrDict attrs = sharding::AxisAttrs(match_.rest);
    attrs.Set("dim", Attribute::Int(2));
    return e.Op(OpKind::kReduceScatter, {grad}, std::move(attrs), std::nullopt, name);
  }

  // (rank - step) mod n: whose block a device holds at `step`.
  Value* SourceAt(OpBuilder& e, Value* step) {
    Value* d = e.Op(OpKind::kSub, {rank_, step});
    return e.Op(OpKind::kRem, {d, IndexLiteral(n_)}, {}, std::nullopt, "src");
  }
  // The same at step n - 1: (rank + 1) mod n.
  Value* LastSource(OpBuilder& e) {
    Value* d = e.Op(OpKind::kAdd, {rank_, IndexLiteral(1)});
    return e.Op(OpKind::kRem, {d, IndexLiteral(n_)}, {}, std::nullopt, "src");
  }

  // k_pos of the block from device `source`: source * block (+ the op's own k_pos).
  Value* KeyPosition(OpBuilder& e, Value* source) {
    Value* offset = block_ == 1 ? source : e.Op(OpKind::kMul, {source, IndexLiteral(block_)});
    if (k_base_ == nullptr) {
      if (offset != nullptr) offset->set_name("k_pos");
      return offset;
    }
    return e.Op(OpKind::kAdd, {offset, k_base_}, {}, std::nullopt, "k_pos");
  }

  // Why the backward cannot take the zigzag layout, or "" when it can (as the forward).
  std::string ZigzagRefusal(const std::optional<Operand>& query_base, int64_t queries) const {
    if (!match_.rest.empty()) {
      return absl::StrFormat("needs the ring to take every gathered axis (left gathered: %s)",
                             absl::StrJoin(match_.rest, ", "));
    }
    if (!query_base.has_value()) {
      return absl::StrFormat("needs q_pos = base + rank(%s) * %d",
                             absl::StrJoin(match_.axes, ", "), queries);
    }
    if (n_ % 2 != 0 || queries % 2 != 0 || block_ % 2 != 0) {
      return absl::StrFormat("needs an even group and even local lengths (group %d, %d queries, "
                             "%d keys)", n_, queries, block_);
    }
    return "";
  }

  // Position of the first key or query of chunk `chunk` (an index value) of `length`:
  // chunk * length + base.
  static Value* ChunkPosition(OpBuilder& e, Value* chunk, int64_t length,
                              const std::optional<Operand>& base, const std::string& name) {
    Value* offset = length == 1 ? chunk : e.Op(OpKind::kMul, {chunk, IndexLiteral(length)});
    if (!base.has_value() || (base->value == nullptr && base->literal == 0)) {
      if (offset != nullptr && !name.empty()) offset->set_name(name);
      return offset;
    }
    return e.Op(OpKind::kAdd, {offset, *base}, {}, std::nullopt, name);
  }

  std::optional<Operand> KeyBase() const {
    if (k_base_ == nullptr) return std::nullopt;
    return Operand(k_base_);
  }

  // The gradients of one query part against keys `k`, `v` at `k_pos` (null when not
  // causal): attention_grad{partial_keys} with the global lse, the block's exact share
  // (see the header), in the kernel's types.
  BlockGrad Pair(OpBuilder& e, const QueryPart& part, Value* k, Value* v, Value* k_pos) {
    std::vector<Operand> positions;
    if (causal_) positions = {part.q_pos, k_pos};
    std::vector<Operand> backward = {part.q, k, v, part.o, part.lse, part.dout};
    backward.insert(backward.end(), positions.begin(), positions.end());
    std::vector<Value*> g =
        e.Ops(OpKind::kAttentionGrad, backward, attrs_, 3, {"dq_blk", "dk_blk", "dv_blk"});
    if (!e.ok()) return {};
    return {g[0], g[1], g[2]};
  }

  // The queries' gradients against one k/v block (from device `source`; null when not
  // causal), in the accumulators' type. Contiguous: one pair, the block gathered over the
  // rest axes and its dk/dv reduce-scattered back. Zigzag: the two query chunks against
  // the block's two key chunks (four pairs, two of them fully masked after the first
  // step, which the kernels skip), each gradient concatenated back into the layout.
  BlockGrad Step(OpBuilder& e, Value* k_block, Value* v_block, Value* source) {
    if (!zz_.has_value()) {
      Value* k = RestGathered(e, k_block, "k_rest");
      Value* v = RestGathered(e, v_block, "v_rest");
      BlockGrad g = Pair(e, queries_[0], k, v, causal_ ? KeyPosition(e, source) : nullptr);
      if (!e.ok()) return {};
      return {e.Convert(g.dq, compute_type_),
              e.Convert(RestScattered(e, g.dk, "dk_rest"), compute_type_),
              e.Convert(RestScattered(e, g.dv, "dv_rest"), compute_type_)};
    }
    const int64_t chunk = block_ / 2;
    std::array<Value*, 2> k = {SequenceSlice(e, k_block, 0, chunk, "k_lo"),
                               SequenceSlice(e, k_block, chunk, chunk, "k_hi")};
    std::array<Value*, 2> v = {SequenceSlice(e, v_block, 0, chunk, "v_lo"),
                               SequenceSlice(e, v_block, chunk, chunk, "v_hi")};
    Value* mirror =
        source == rank_ ? zz_->MirrorRank() : e.Op(OpKind::kSub, {IndexLiteral(2 * n_ - 1), source});
    std::array<Value*, 2> k_pos = {ChunkPosition(e, source, chunk, KeyBase(), "k_pos_lo"),
                                   ChunkPosition(e, mirror, chunk, KeyBase(), "k_pos_hi")};
    std::array<Value*, 2> dq = {nullptr, nullptr}, dk = {nullptr, nullptr}, dv = {nullptr, nullptr};
    auto add = [&](Value*& sum, Value* x) {
      x = e.Convert(x, compute_type_);
      sum = sum == nullptr ? x : e.Op(OpKind::kAdd, {sum, x});
    };
    for (int h = 0; h < 2; ++h) {
      for (int g = 0; g < 2; ++g) {
        BlockGrad pair = Pair(e, queries_[h], k[g], v[g], k_pos[g]);
        if (!e.ok()) return {};
        add(dq[h], pair.dq);
        add(dk[g], pair.dk);
        add(dv[g], pair.dv);
      }
    }
    return {e.Op(OpKind::kConcat, {dq[0], dq[1]}, DimAttrs(2)),
            e.Op(OpKind::kConcat, {dk[0], dk[1]}, DimAttrs(2)),
            e.Op(OpKind::kConcat, {dv[0], dv[1]}, DimAttrs(2))};
  }

  Function& function_;
  const GatheredAttention& match_;
  Operation* op_;
  int64_t n_;
  OpBuilder e_;
  Value* q_ = nullptr;
  Value* o_ = nullptr;
  Value* lse_ = nullptr;
  Value* dout_ = nullptr;
  Value* q_pos_ = nullptr;
  Value* k_base_ = nullptr;
  Value* k_ = nullptr;
  Value* v_ = nullptr;
  Value* rank_ = nullptr;
  // The query operands a step pairs with each key block: one, or the two zigzag chunks.
  std::vector<QueryPart> queries_;
  // The zigzag layout's permutations (zigzag rings only).
  std::optional<ZigzagPermutation> zz_;
  bool causal_ = false;
  ElementType element_type_ = ElementType::kF32;
  ElementType compute_type_ = ElementType::kF32;
  AttrDict attrs_;
  int64_t block_ = 0;
};

}  // namespace

absl::Status RingAttentionGrad(Function& function, const GatheredAttention& match, bool zigzag,
                               std::vector<Operation*>* rewritten,
                               std::vector<std::string>* skipped) {
  return RingGrad(function, match).Run(zigzag, rewritten, skipped);
}

}  // namespace commir::schedules
