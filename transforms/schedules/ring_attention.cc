#include "transforms/schedules/ring_attention.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/status_macros.h"
#include "commir/attention_op.h"
#include "commir/type.h"
#include "transforms/schedules/attention_match.h"
#include "transforms/schedules/counted_loop.h"
#include "transforms/schedules/ring_attention_grad.h"
#include "transforms/schedules/ring_zigzag.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/zigzag.h"

namespace commir::schedules {
namespace {

// Communication goes on this stream, compute stays on stream 0; data dependencies alone
// order them (docs/language.md, "Streams").
constexpr int64_t kCommStream = 1;
// A ring that leaves axes gathered shifts on its own stream: a ring over those axes in
// each step (the double ring) shifts on kCommStream, and a stream runs its ops in issue
// order, so the outer block's transfer would otherwise wait for the inner ring's.
constexpr int64_t kOuterCommStream = 2;

// A partial attention result: output and log-sum-exp, both in the merge's compute type.
struct Partial {
  Value* o = nullptr;
  Value* lse = nullptr;
};

class Ring {
 public:
  Ring(Function& function, const GatheredAttention& match)
      : function_(function), match_(match), attention_(match.attention), n_(match.group_size),
        e_(&function, match.attention->parent_block(), match.attention, match.attention->loc()) {
    q_ = AttentionOp(*attention_).q();
    k_ = match.k_gather->operand(0);
    v_ = match.v_gather->operand(0);
    causal_ = AttentionOp(*attention_).causal();
    element_type_ = q_->type().element_type();
    compute_type_ = element_type_ == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
    attrs_ = attention_->attrs();
    attrs_.Erase("stream");
    queries_ = q_->type().dims()[2];
    // With axes left gathered, each step gathers the held blocks of the rest group into
    // one contiguous super-block (attention_match.h): positions count in those.
    block_ = k_->type().dims()[2] * match.rest_size;
    k_base_ = AttentionOp(*attention_).k_pos();
  }

  // Appends the attention to `rewritten` when it was rewritten (its results now unused).
  absl::Status Run(bool zigzag, std::vector<Operation*>* rewritten,
                   std::vector<std::string>* skipped) {
    // Positions, the ring's source blocks and the zigzag layout need the rank; plain
    // attention needs none.
    if (causal_) rank_ = FindOrMakeRank();
    std::optional<Operand> query_base;
    if (Value* q_pos = AttentionOp(*attention_).q_pos(); causal_ && q_pos != nullptr) {
      query_base = QueryBase(q_pos, match_.axes, queries_);
    }
    bool zigzag_ok = false;
    if (zigzag && causal_) {
      std::string refusal = ZigzagRefusal(query_base);
      zigzag_ok = refusal.empty();
      if (!zigzag_ok && skipped != nullptr) {
        skipped->push_back(absl::StrFormat("@%s: attention at %d:%d: zigzag %s; contiguous ring used",
                                           function_.name(), attention_->loc().line,
                                           attention_->loc().col, refusal));
      }
    }
    Value* out = nullptr;
    Value* lse = nullptr;
    if (zigzag_ok) {
      RunZigzag(*query_base, out, lse, rewritten);
    } else {
      RunContiguous(out, lse);
    }
    if (!e_.ok()) {
      return absl::InternalError(absl::StrCat("ring-attention: ", e_.status().message()));
    }
    if (out != nullptr) {
      out->set_name(attention_->result(0)->name());
      attention_->result(0)->ReplaceAllUsesWith(out);
    }
    if (attention_->num_results() == 2 && lse != nullptr) {
      lse->set_name(attention_->result(1)->name());
      attention_->result(1)->ReplaceAllUsesWith(lse);
    }
    // Erased with its dead producers by the caller, with the other rewritten ones.
    rewritten->push_back(attention_);
    return absl::OkStatus();
  }

 private:
  // Why causal attention cannot take the zigzag layout, or "" when it can.
  std::string ZigzagRefusal(const std::optional<Operand>& query_base) const {
    // Zigzag permutes the sequence over the ring's axes; with axes left gathered the
    // queries' chunks would interleave with the rest group's blocks.
    if (!match_.rest.empty()) {
      return absl::StrFormat("needs the ring to take every gathered axis (left gathered: %s)",
                             absl::StrJoin(match_.rest, ", "));
    }
    if (!query_base.has_value()) {
      return absl::StrFormat("needs q_pos = base + rank(%s) * %d",
                             absl::StrJoin(match_.axes, ", "), queries_);
    }
    if (n_ % 2 != 0 || queries_ % 2 != 0 || block_ % 2 != 0) {
      return absl::StrFormat("needs an even group and even local lengths (group %d, %d queries, "
                             "%d keys)", n_, queries_, block_);
    }
    return "";
  }

  Value* FindOrMakeRank() { return FindOrMakeTopLevelRank(e_, attention_, match_.axes); }

  // The step's keys or values: the held block, or with axes left gathered its rest
  // group's blocks gathered into one super-block (an all_gather a ring over those axes
  // can take in turn: on the main stream, along the sequence).
  Value* RestGathered(OpBuilder& e, Value* block, const char* name) {
    if (match_.rest.empty()) return block;
    AttrDict attrs = sharding::AxisAttrs(match_.rest);
    attrs.Set("dim", Attribute::Int(2));
    return e.Op(OpKind::kAllGather, {block}, std::move(attrs), std::nullopt, name);
  }

  // x + base (x itself when there is no base or it is 0).
  static Value* AddBase(OpBuilder& e, Value* x, const std::optional<Operand>& base,
                        const std::string& name) {
    if (!base.has_value() || (base->value == nullptr && base->literal == 0)) {
      if (x != nullptr && !name.empty()) x->set_name(name);
      return x;
    }
    return e.Op(OpKind::kAdd, {x, *base}, {}, std::nullopt, name);
  }

  std::optional<Operand> KeyBase() const {
    if (k_base_ == nullptr) return std::nullopt;
    return Operand(k_base_);
  }

  // Position of the first key of chunk `chunk` (an index value) of `length` keys.
  Value* ChunkPosition(OpBuilder& e, Value* chunk, int64_t length,
                       const std::optional<Operand>& base, const std::string& name) {
    Value* offset = length == 1 ? chunk : e.Op(OpKind::kMul, {chunk, IndexLiteral(length)});
    return AddBase(e, offset, base, name);
  }

  Value* Shift(OpBuilder& e, Value* x, const std::string& name) {
    int64_t stream = match_.rest.empty() ? kCommStream : kOuterCommStream;
    return e.Op(OpKind::kShift, {x}, CollectiveAttrs(match_.axes, stream), std::nullopt, name);
  }

  // One block's attention: its output in q's element type and its f32 lse, as the
  // attention op makes them (attention_merge widens them itself).
  Partial Attend(OpBuilder& e, Value* q, Value* k, Value* v, Value* q_pos, Value* k_pos) {
    std::vector<Operand> operands = {q, RestGathered(e, k, "k_rest"), RestGathered(e, v, "v_rest")};
    if (causal_) {
      operands.push_back(q_pos);
      operands.push_back(k_pos);
    }
    std::vector<Value*> r = e.Ops(OpKind::kAttention, operands, attrs_, 2, {"o_blk", "lse_blk"});
    return {r[0], r[1]};
  }

  // The first partial as the accumulator, in the merge's compute type.
  Partial Accumulator(OpBuilder& e, const Partial& part) {
    if (!e.ok()) return {};
    return {e.Convert(part.o, compute_type_), e.Convert(part.lse, compute_type_)};
  }

  // Online-softmax merge of the partials into the accumulator, in order (see
  // ring_attention.h): one attention_merge, one kernel however many partials.
  Partial Merge(OpBuilder& e, const Partial& acc, const std::vector<Partial>& parts) {
    if (!e.ok()) return {};
    std::vector<Operand> operands = {acc.o, acc.lse};
    for (const Partial& part : parts) {
      operands.push_back(part.o);
      operands.push_back(part.lse);
    }
    std::vector<Value*> r = e.Ops(OpKind::kAttentionMerge, operands, {}, 2, {"o_step", "lse_step"});
    if (!e.ok()) return {};
    return {r[0], r[1]};
  }

  // A `for %step = lower to upper` at the emitter's position, carrying `inits`; the body
  // is empty (no yield yet).
  using Loop = CountedLoop;
  Loop MakeLoop(int64_t lower, int64_t upper, const std::vector<Value*>& inits,
                const std::vector<std::string>& names, const std::vector<std::string>& result_names) {
    if (!e_.ok()) return {};
    Loop loop = InsertCountedLoop(e_.block(), e_.before(), e_.loc(), lower, upper, inits, "step",
                                  names);
    for (size_t i = 0; i < result_names.size(); ++i) loop.op->result(i)->set_name(result_names[i]);
    return loop;
  }

  // Runs the loop body builder on an emitter for the body, then folds its status into e_.
  template <typename Fn>
  void InBody(Loop& loop, Fn&& fn) {
    OpBuilder body(&function_, loop.op->region(0), nullptr, e_.loc());
    std::vector<Value*> yielded = fn(body);
    if (!body.ok()) {
      e_.Fail(body.status());
      return;
    }
    YieldFromLoop(loop, yielded, e_.loc());
  }

  // The block index a device holds at ring step `step`: (rank - step) mod n.
  Value* SourceAt(OpBuilder& e, Value* step) {
    Value* d = e.Op(OpKind::kSub, {rank_, step});
    return e.Op(OpKind::kRem, {d, IndexLiteral(n_)}, {}, std::nullopt, "src");
  }
  // The same for the last step, n - 1: (rank + 1) mod n.
  Value* LastSource(OpBuilder& e) {
    Value* d = e.Op(OpKind::kAdd, {rank_, IndexLiteral(1)});
    return e.Op(OpKind::kRem, {d, IndexLiteral(n_)}, {}, std::nullopt, "src");
  }

  // ---- Contiguous layout: device r holds block r of the sequence. ----------------------

  void RunContiguous(Value*& out, Value*& lse_out) {
    Value* q_pos = nullptr;
    if (causal_) {
      q_pos = AttentionOp(*attention_).q_pos();
      if (q_pos == nullptr) q_pos = e_.IndexConstant(n_ * block_ - queries_, "q_pos");
    }
    auto key_pos = [&](OpBuilder& e, Value* source) -> Value* {
      return causal_ ? ChunkPosition(e, source, block_, KeyBase(), "k_pos") : nullptr;
    };
    // With axes left gathered a step is long (a gather, or a ring over those axes), so
    // the first shift is issued before it, as the loop's are, to overlap all of it.
    const bool shift_first = !match_.rest.empty();
    Value* kb = shift_first ? Shift(e_, k_, "k_step1") : nullptr;
    Value* vb = shift_first ? Shift(e_, v_, "v_step1") : nullptr;
    Partial acc = Accumulator(e_, Attend(e_, q_, k_, v_, q_pos, key_pos(e_, rank_)));
    if (!shift_first) {
      kb = Shift(e_, k_, "k_step1");
      vb = Shift(e_, v_, "v_step1");
    }
    if (n_ > 2 && e_.ok()) {
      Loop loop = MakeLoop(1, n_ - 1, {acc.o, acc.lse, kb, vb}, {"o_acc", "lse_acc", "k_blk", "v_blk"},
                           {"o_loop", "lse_loop", "k_last", "v_last"});
      InBody(loop, [&](OpBuilder& b) -> std::vector<Value*> {
        Value* k_next = Shift(b, loop.carried[2], "k_next");
        Value* v_next = Shift(b, loop.carried[3], "v_next");
        Value* source = causal_ ? SourceAt(b, loop.iv) : nullptr;
        Partial part = Attend(b, q_, loop.carried[2], loop.carried[3], q_pos, key_pos(b, source));
        Partial merged = Merge(b, {loop.carried[0], loop.carried[1]}, {part});
        return {merged.o, merged.lse, k_next, v_next};
      });
      if (!e_.ok()) return;
      acc = {loop.op->result(0), loop.op->result(1)};
      kb = loop.op->result(2);
      vb = loop.op->result(3);
    }
    Value* source = causal_ ? LastSource(e_) : nullptr;
    acc = Merge(e_, acc, {Attend(e_, q_, kb, vb, q_pos, key_pos(e_, source))});
    out = e_.Convert(acc.o, element_type_);
    lse_out = attention_->num_results() == 2 ? e_.Convert(acc.lse, ElementType::kF32) : nullptr;
  }

  // ---- Zigzag layout: device r holds chunks r and 2n-1-r of 2n. ------------------------

  // One ring step in the zigzag layout: the local query chunks (a: chunk r, b: chunk
  // 2n-1-r) against the two key chunks of the block from device `source`, merged into
  // `acc` (empty on the first step): one attention_merge per query chunk takes its key
  // chunks. Of the four chunk pairs two are fully masked on every device and step but
  // the first, where the device's own diagonal pairs come first; one of them, query
  // chunk r against key chunk 2n-1-s, on every step when queries and keys align, and is
  // then not emitted (LowQueriesNeverSeeHighKeys).
  void ZigzagStep(OpBuilder& e, Value* k_block, Value* v_block, Value* source,
                  std::array<Partial, 2>& acc, bool first) {
    int64_t chunk = block_ / 2;
    std::array<Value*, 2> k = {SequenceSlice(e, k_block, 0, chunk, "k_lo"), SequenceSlice(e, k_block, chunk, chunk, "k_hi")};
    std::array<Value*, 2> v = {SequenceSlice(e, v_block, 0, chunk, "v_lo"), SequenceSlice(e, v_block, chunk, chunk, "v_hi")};
    Value* mirror =
        source == rank_ ? zz_->MirrorRank() : e.Op(OpKind::kSub, {IndexLiteral(2 * n_ - 1), source});
    std::array<Value*, 2> k_pos = {ChunkPosition(e, source, chunk, KeyBase(), "k_pos_lo"),
                                   ChunkPosition(e, mirror, chunk, KeyBase(), "k_pos_hi")};
    for (int h = 0; h < 2; ++h) {
      std::vector<Partial> parts;
      for (int g : {h, 1 - h}) {
        if (h == 0 && g == 1 && low_queries_never_see_high_keys_) continue;
        parts.push_back(Attend(e, q_half_[h], k[g], v[g], q_pos_half_[h], k_pos[g]));
      }
      if (first) {
        acc[h] = Accumulator(e, parts[0]);
        parts.erase(parts.begin());
      }
      if (!parts.empty()) acc[h] = Merge(e, acc[h], parts);
    }
  }

  // Whether query chunk r never sees key chunk 2n-1-s, on any device and step: with
  // equal chunk lengths and the keys' base at or after the queries', key chunk 2n-1-s
  // (>= n) starts after query chunk r (< n) ends. That pair's attention would return
  // lse = -inf on every row, which a merge into the chunk's running result (finite from
  // its diagonal at step 0) leaves unchanged to the bit: it is not emitted.
  bool LowQueriesNeverSeeHighKeys(const Operand& query_base) const {
    if (queries_ != block_) return false;
    if (k_base_ == nullptr) return query_base.value == nullptr && query_base.literal <= 0;
    return query_base.value == k_base_;
  }

  void RunZigzag(const Operand& query_base, Value*& out, Value*& lse_out,
                 std::vector<Operation*>* rewritten) {
    int64_t q_chunk = queries_ / 2;
    int64_t kv_chunk = block_ / 2;
    low_queries_never_see_high_keys_ = LowQueriesNeverSeeHighKeys(query_base);
    zz_.emplace(e_, rank_, n_, match_.axes);
    Value* q = zz_->ZigzagOf(q_, q_chunk, "q_zz");
    Value* k = zz_->ZigzagOf(k_, kv_chunk, "k_zz");
    Value* v = zz_->ZigzagOf(v_, kv_chunk, "v_zz");
    q_half_ = {SequenceSlice(e_, q, 0, q_chunk, "q_lo"), SequenceSlice(e_, q, q_chunk, q_chunk, "q_hi")};
    q_pos_half_ = {ChunkPosition(e_, rank_, q_chunk, query_base, "q_pos_lo"),
                   ChunkPosition(e_, zz_->MirrorRank(), q_chunk, query_base, "q_pos_hi")};
    std::array<Partial, 2> acc;
    ZigzagStep(e_, k, v, rank_, acc, /*first=*/true);
    Value* kb = Shift(e_, k, "k_step1");
    Value* vb = Shift(e_, v, "v_step1");
    if (n_ > 2 && e_.ok()) {
      Loop loop = MakeLoop(1, n_ - 1, {acc[0].o, acc[0].lse, acc[1].o, acc[1].lse, kb, vb},
                           {"o_lo", "lse_lo", "o_hi", "lse_hi", "k_blk", "v_blk"},
                           {"o_lo_loop", "lse_lo_loop", "o_hi_loop", "lse_hi_loop", "k_last", "v_last"});
      InBody(loop, [&](OpBuilder& b) -> std::vector<Value*> {
        Value* k_next = Shift(b, loop.carried[4], "k_next");
        Value* v_next = Shift(b, loop.carried[5], "v_next");
        std::array<Partial, 2> state = {Partial{loop.carried[0], loop.carried[1]},
                                        Partial{loop.carried[2], loop.carried[3]}};
        ZigzagStep(b, loop.carried[4], loop.carried[5], SourceAt(b, loop.iv), state, false);
        return {state[0].o, state[0].lse, state[1].o, state[1].lse, k_next, v_next};
      });
      if (!e_.ok()) return;
      acc = {Partial{loop.op->result(0), loop.op->result(1)},
             Partial{loop.op->result(2), loop.op->result(3)}};
      kb = loop.op->result(4);
      vb = loop.op->result(5);
    }
    ZigzagStep(e_, kb, vb, LastSource(e_), acc, false);
    Value* o = e_.Op(OpKind::kConcat, {acc[0].o, acc[1].o}, DimAttrs(2));
    out = zz_->ContiguousFor(attention_->result(0), e_.Convert(o, element_type_), q_chunk, rewritten);
    lse_out = nullptr;
    if (attention_->num_results() == 2) {
      Value* lse = e_.Op(OpKind::kConcat, {acc[0].lse, acc[1].lse}, DimAttrs(2));
      lse_out = zz_->ContiguousFor(attention_->result(1), e_.Convert(lse, ElementType::kF32), q_chunk,
                              rewritten);
    }
  }

  Function& function_;
  const GatheredAttention& match_;
  Operation* attention_;
  int64_t n_;
  OpBuilder e_;
  Value* q_ = nullptr;
  Value* k_ = nullptr;
  Value* v_ = nullptr;
  Value* k_base_ = nullptr;
  Value* rank_ = nullptr;
  // The zigzag layout's permutations (zigzag rings only).
  std::optional<ZigzagPermutation> zz_;
  bool causal_ = false;
  ElementType element_type_ = ElementType::kF32;
  ElementType compute_type_ = ElementType::kF32;
  AttrDict attrs_;
  int64_t queries_ = 0;
  int64_t block_ = 0;
  std::array<Value*, 2> q_half_ = {nullptr, nullptr};
  std::array<Value*, 2> q_pos_half_ = {nullptr, nullptr};
  bool low_queries_never_see_high_keys_ = false;
};

}  // namespace

absl::Status RingAttention(Module& module, bool zigzag, const AxisList& axes,
                           std::vector<std::string>* skipped, int* rewritten_count) {
  for (Function* function : module.functions()) {
    std::vector<Operation*> rewritten;
    absl::Status status;
    for (const GatheredAttention& match :
         FindGatheredAttention(*function, axes, GatherEnd::kLeading, skipped)) {
      status = match.is_grad() ? RingAttentionGrad(*function, match, zigzag, &rewritten, skipped)
                               : Ring(*function, match).Run(zigzag, &rewritten, skipped);
      if (!status.ok()) break;
    }
    EraseWithDeadProducers(rewritten);
    if (rewritten_count != nullptr) *rewritten_count += static_cast<int>(rewritten.size());
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

const OptionSchema<RingAttentionOptions>& RingAttentionOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<RingAttentionOptions>())
           .Bool("zigzag", &RingAttentionOptions::zigzag,
                 "Causal: hold chunks r and 2n-1-r so every step does equal work (permutes q, k, "
                 "v and the output with all_to_all)")
           .String("axes", &RingAttentionOptions::axes,
                   "Mesh axes of the k/v gather to ring over, e.g. sp or \"dp,sp\": the leading "
                   "axes of the gather; the rest stay gathered in each step (empty: every axis)");
  return *schema;
}

const PassInfo& RingAttentionPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<RingAttentionPass>(
      "ring-attention",
      "Replace all-gathered k/v of sequence-parallel attention by a ring of shifted blocks "
      "merged by online softmax"));
  return *info;
}

absl::Status RingAttentionPass::Run(Module& module) {
  skipped_.clear();
  COMMIR_ASSIGN_OR_RETURN(AxisList axes, ParseScheduleAxes(module, options().axes, name()));
  int rewritten = 0;
  absl::Status status = RingAttention(module, options().zigzag, axes, &skipped_, &rewritten);
  ReportRewrites(rewritten, "Attention ops rewritten to a ring",
                 skipped_.empty()
                     ? absl::StrCat("no attention with k/v all-gathered along the sequence ",
                                    InSpmdFunctions(module))
                     : absl::StrJoin(skipped_, "; "));
  return status;
}

}  // namespace commir::schedules
