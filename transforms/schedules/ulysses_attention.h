// ulysses-attention: sequence-parallel attention by all-to-all (DeepSpeed-Ulysses).
//
// Matches `attention(q, all_gather(k), all_gather(v))` with the gathers along the
// sequence (dim 2) over a group of n >= 2 devices (attention_match.h) and replaces it
// with: q, k and v each go from a sequence split to a head split with
// `all_to_all {split_dim = 1, concat_dim = 2}` (stream 1), every device attends its H/n
// heads over the whole sequence, and the output (and lse, if asked for) goes back with
// `all_to_all {split_dim = 2, concat_dim = 1}`. Received blocks are concatenated in
// source order, so the keys are exactly the gathered sequence and k_pos is kept; the
// queries, now the whole sequence, sit at the position of the first query, recovered
// from q_pos = base + rank * Sq_local (the form lower-to-spmd writes).
//
// Heads: H must be divisible by n. GQA with Hkv not divisible by n repeats each kv head
// r times first (reshape, broadcast, reshape: kv head c becomes heads c*r .. c*r+r-1,
// which keeps head h reading its own kv head) with Hkv*r = lcm(Hkv, n), if H is divisible
// by that; the repeat costs r times the k/v all_to_all bytes. Otherwise, and for causal
// attention whose q_pos has another form, the op is left unchanged.
//
// axes= (all_to_all over the trailing axes of a gather over more; attention_match.h):
// each device then holds the contiguous chunk rank(rest) of the sequence for its heads;
// the attention reads all_gathers over the other (leading) axes of k and v, and its
// queries sit at base + rank(rest) * chunk, so a ring over the rest can follow (USP).
//
// attention_grad whose dk and dv are reduce-scattered along the sequence (the lowered
// backward; attention_match.h) is rewritten the same way: q, k, v, o, lse and dout go to
// the head split, one attention_grad runs over the whole sequence, and dq, dk, dv come
// back, the repeated kv heads' dk/dv summed onto their kv head. With axes left gathered,
// dk/dv are first reduce-scattered over them (each device keeps its sequence chunk). An
// o, lse or dout that is the all_to_all back from a head split over the same axes (a
// Ulysses forward's result) is taken before that exchange: the round trip costs nothing.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_ULYSSES_ATTENTION_H_
#define COMMIR_TRANSFORMS_SCHEDULES_ULYSSES_ATTENTION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::schedules {

// Rewrites every matching attention of `module`'s spmd functions; leaves the rest as is.
// `axes` (empty: every gathered axis) must be the trailing axes of an attention's
// sequence gather; the all_to_all runs over them and the leading axes stay gathered
// (attention_match.h). Why an attention was left alone is appended to `skipped`; the
// attentions rewritten are counted into `*rewritten` when given.
absl::Status UlyssesAttention(Module& module, const AxisList& axes = {},
                              std::vector<std::string>* skipped = nullptr, int* rewritten = nullptr);

struct UlyssesAttentionOptions {
  // Mesh axes of the k/v gather to all_to_all over, "sp" or "dp,sp" (empty: every axis).
  std::string axes = "";

  static const OptionSchema<UlyssesAttentionOptions>& Schema();
};

class UlyssesAttentionPass : public OptionsPass<UlyssesAttentionOptions> {
 public:
  static const PassInfo& Info();
  explicit UlyssesAttentionPass(UlyssesAttentionOptions options = {})
      : OptionsPass(Info(), std::move(options)) {}
  absl::Status Run(Module& module) override;
  // Why the last Run left attentions alone (for remarks): one line each.
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<std::string> skipped_;
};

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_ULYSSES_ATTENTION_H_
