// ring-attention: sequence-parallel attention without gathering the keys and values.
//
// Matches `attention(q, all_gather(k), all_gather(v))` with the gathers along the
// sequence (dim 2) over a group of n >= 2 devices (attention_match.h), the form
// lower-to-spmd gives causal or plain attention with a split sequence, and replaces it
// with n steps. Step s attends the local queries to the k/v block that started on
// device (rank - s) mod n: step 0 is the device's own block, and each step shifts the
// block it holds one device along the ring (`shift` on stream 1) for the next step
// while it computes, so the transfer overlaps the step's attention; the last step sends
// nothing. Steps 1..n-2 are a `for` loop carrying (o, lse, k block, v block); step n-1
// is peeled after it.
//
// Each step's `attention` gives a partial output and its log-sum-exp (the keys' positions
// from k_pos = ((rank - s) mod n) * block, so causal masks stay exact); partial results are
// merged by online softmax with one `attention_merge` op per step (per query chunk with
// zigzag), in f32 (f64 for f64) whatever the input type: step 0's result is converted
// to that type, later steps' bf16 outputs are widened inside the merge, and the result
// is converted back at the end. The merge (commir/online_softmax.h):
//   m = max(lse_a, lse_b, -1e30)  w_x = exp(lse_x - m)  s = w_a + w_b
//   lse = m + log(s)              o = o_a * w_a / max(s, 1e-30) + o_b * w_b / max(s, 1e-30)
// The floor on m keeps exp(-inf - -inf) = NaN out when neither side has seen a key yet
// (then s = 0, lse = -inf and o = 0, as attention itself defines such a row).
//
// Fully masked blocks: loop bounds are static and rank is dynamic, so every device runs
// every step; a block wholly in its queries' future makes the attention kernel return
// zeros and lse = -inf without any GEMM (backend_cpu/attention.cc), and the merge keeps
// the running result.
//
// zigzag=true (causal attention whose q_pos is base + rank * Sq_local, as lower-to-spmd
// writes it, with n even and even local lengths): each device holds sequence chunks r
// and 2n-1-r of 2n, so every step does the same unmasked work on every device (two of the
// four chunk pairs after the first step; see docs/format-decisions.md). Each step makes
// one attention call per (query chunk, key chunk) pair, at the chunks' own positions, and
// one attention_merge per query chunk folding its pairs in; when queries and keys align
// (equal lengths, the keys' base not before the queries'), query chunk r never sees key
// chunk 2n-1-s, and that pair is not emitted: three calls a step. The
// pass permutes q, k and v into that layout at entry and the output (and lse) back at
// exit, one all_to_all each, so the function's signature and meaning do not change. Other
// cases get the contiguous ring.
//
// axes= (a ring over the leading axes of a gather over more; attention_match.h): the
// ring circulates the device's own block over those axes, and each step attends to the
// all_gather over the other axes of the block it holds (one contiguous super-block, at
// k_pos + source * super-block). Its shifts go on stream 2 and step 0's are issued before
// step 0, so that a ring over the other axes in each step (a second pass, on stream 1:
// the double ring) runs beside the outer transfer. Zigzag needs every axis.
//
// attention_grad (a sequence-split backward: gathered k/v, dk/dv reduce-scattered) gets
// a ring too, k/v travelling with their dk/dv accumulators: ring_attention_grad.h.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_H_
#define COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::schedules {

// Rewrites every matching attention of `module`'s spmd functions; leaves the rest as is.
// `axes` (empty: every gathered axis) must be the leading axes of an attention's sequence
// gather; the others stay gathered in each step (attention_match.h). Why an attention
// was left alone, or zigzag not applied, is appended to `skipped` when given; the
// attentions rewritten are counted into `*rewritten` when given.
absl::Status RingAttention(Module& module, bool zigzag, const AxisList& axes = {},
                           std::vector<std::string>* skipped = nullptr, int* rewritten = nullptr);

struct RingAttentionOptions {
  // Causal: hold chunks r and 2n-1-r so that every step does equal work.
  bool zigzag = false;
  // Mesh axes of the k/v gather to ring over, "sp" or "dp,sp" (empty: every axis).
  std::string axes = "";

  static const OptionSchema<RingAttentionOptions>& Schema();
};

class RingAttentionPass : public OptionsPass<RingAttentionOptions> {
 public:
  static const PassInfo& Info();
  explicit RingAttentionPass(RingAttentionOptions options = {})
      : OptionsPass(Info(), std::move(options)) {}
  absl::Status Run(Module& module) override;
  // Why the last Run left attentions alone (for remarks): one line each.
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<std::string> skipped_;
};

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_H_
