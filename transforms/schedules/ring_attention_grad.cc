#include "transforms/schedules/ring_attention_grad.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/attention_op.h"
#include "commir/type.h"
#include "transforms/schedules/counted_loop.h"
#include "transforms/sharding/layout.h"

namespace commir::schedules {
namespace {

// As the forward ring (ring_attention.cc): stream 1, or stream 2 when axes stay gathered
// so that a ring over those (on stream 1) runs beside it.
constexpr int64_t kCommStream = 1;
constexpr int64_t kOuterCommStream = 2;

// One block's gradients, in the accumulators' type.
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
    block_ = k_->type().dims()[2] * match.rest_size;
  }

  absl::Status Run(std::vector<Operation*>* rewritten) {
    if (causal_) {
      rank_ = FindOrMakeTopLevelRank(e_, op_, match_.axes);
      // attention_grad's default q_pos (keys - queries) counts in the gathered keys.
      if (q_pos_ == nullptr) q_pos_ = e_.IndexConstant(n_ * block_ - q_->type().dims()[2], "q_pos");
    }
    // The global lse floored (see the header), and dout, in the weights' type.
    Value* lse = e_.Convert(lse_, compute_type_);
    lse_floor_ = e_.Op(OpKind::kMax, {lse, Operand::Literal(-1e30, Type::Scalar(compute_type_))},
                       {}, std::nullopt, "lse_floor");
    dout_c_ = e_.Convert(dout_, compute_type_);

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
    for (int i = 0; i < 3; ++i) {
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

  // The queries' gradients against one k/v block (from device `source`; null when not
  // causal), exact with the global lse (see the header), in the accumulators' type.
  BlockGrad Step(OpBuilder& e, Value* k_block, Value* v_block, Value* source) {
    Value* k = RestGathered(e, k_block, "k_rest");
    Value* v = RestGathered(e, v_block, "v_rest");
    std::vector<Operand> positions;
    if (causal_) positions = {q_pos_, KeyPosition(e, source)};
    std::vector<Operand> forward = {q_, k, v};
    forward.insert(forward.end(), positions.begin(), positions.end());
    std::vector<Value*> recomputed = e.Ops(OpKind::kAttention, forward, attrs_, 2, {"", "lse_blk"});
    if (!e.ok()) return {};
    // w = exp(lse_blk - lse): the block's share of each row's probability mass.
    Value* log_w = e.Op(OpKind::kSub, {e.Convert(recomputed[1], compute_type_), lse_floor_});
    Value* w = e.Op(OpKind::kExp, {log_w}, {}, std::nullopt, "w_blk");
    if (!e.ok()) return {};
    std::vector<int64_t> column = w->type().dims();
    column.push_back(1);
    Value* w4 = e.Op(OpKind::kReshape, {w}, {}, Type::Tensor(compute_type_, column));
    Value* dout_w = e.Convert(e.Op(OpKind::kMul, {dout_c_, w4}), element_type_);
    // The block's own lse makes the step's attention_grad consistent (its lse is its
    // keys' log-sum-exp, as the global one is for the whole op), which the kernel's
    // renormalisation does not need but a ring over the step's rest axes does: it
    // weights the step's sub-blocks against this lse.
    std::vector<Operand> backward = {q_, k, v, o_, recomputed[1], dout_w};
    backward.insert(backward.end(), positions.begin(), positions.end());
    std::vector<Value*> g =
        e.Ops(OpKind::kAttentionGrad, backward, attrs_, 3, {"dq_blk", "dk_blk", "dv_blk"});
    if (!e.ok()) return {};
    return {e.Convert(g[0], compute_type_),
            e.Convert(RestScattered(e, g[1], "dk_rest"), compute_type_),
            e.Convert(RestScattered(e, g[2], "dv_rest"), compute_type_)};
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
  Value* lse_floor_ = nullptr;
  Value* dout_c_ = nullptr;
  bool causal_ = false;
  ElementType element_type_ = ElementType::kF32;
  ElementType compute_type_ = ElementType::kF32;
  AttrDict attrs_;
  int64_t block_ = 0;
};

}  // namespace

absl::Status RingAttentionGrad(Function& function, const GatheredAttention& match,
                               std::vector<Operation*>* rewritten) {
  return RingGrad(function, match).Run(rewritten);
}

}  // namespace commir::schedules
