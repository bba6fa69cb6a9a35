// Global attention programs for the attention schedule tests.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_TEST_PROGRAMS_H_
#define COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_TEST_PROGRAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace commir::schedules::testing {

struct AttentionCase {
  int64_t devices = 4;
  bool causal = true;
  const char* dtype = "f32";
  int64_t heads = 8, kv_heads = 8;
  int64_t queries = 64, keys = 64;  // global sequence lengths, both split over sp
  int64_t head_dim = 16;
  bool lse = false;  // also return the log-sum-exp
  // The signature declares the sequence zigzag (`@sp zigzag`) on every argument and
  // result, as a load-balancing data loader provides it.
  bool zigzag_layout = false;

  std::string Name() const {
    return absl::StrFormat("n%d_%s_%s_h%d_kv%d_s%dx%d%s", devices, causal ? "causal" : "full",
                           dtype, heads, kv_heads, queries, keys, lse ? "_lse" : "") +
           (zigzag_layout ? "_zigzag_layout" : "");
  }
};

// @attn on mesh @m(<mesh_axes>): q [1, H, Sq@<split>, D], k and v [1, Hkv, Skv@<split>, D]
// (c.devices is not used): e.g. ("a=2, b=4", "(a, b)") for a sequence split over two axes;
// with c.zigzag_layout the split is declared zigzag.
inline std::string GlobalAttentionOnMesh(const AttentionCase& c, absl::string_view mesh_axes,
                                         absl::string_view axes) {
  std::string split = absl::StrCat("@", axes, c.zigzag_layout ? " zigzag" : "");
  std::string q = absl::StrFormat("%s[1, %d, %d%s, %d]", c.dtype, c.heads, c.queries, split, c.head_dim);
  std::string kv = absl::StrFormat("%s[1, %d, %d%s, %d]", c.dtype, c.kv_heads, c.keys, split, c.head_dim);
  std::string results =
      c.lse ? absl::StrFormat("(%s, f32[1, %d, %d%s])", q, c.heads, c.queries, split) : q;
  return absl::StrCat("mesh @m(", mesh_axes, ")\n\nfunc @attn(%q: ", q, ", %k: ", kv, ", %v: ", kv,
                      ") -> ", results, " {\n  ", c.lse ? "%o, %lse" : "%o",
                      " = attention(%q, %k, %v)", c.causal ? " {causal}" : "",
                      "\n  return ", c.lse ? "%o, %lse" : "%o", "\n}\n");
}

// @attn on mesh @m(sp=devices), the sequence split over sp.
inline std::string GlobalAttention(const AttentionCase& c) {
  return GlobalAttentionOnMesh(c, absl::StrCat("sp=", c.devices), "sp");
}

// @attn_grad on mesh @m(<mesh_axes>): the forward (with lse) and attention_grad of the
// case's attention, q, k, v and the output gradient %do split along the sequence over
// <axes> (declared zigzag with c.zigzag_layout); returns dq, dk, dv. (c.lse is not used.)
inline std::string GlobalAttentionGradOnMesh(const AttentionCase& c, absl::string_view mesh_axes,
                                             absl::string_view axes) {
  std::string split = absl::StrCat(axes, c.zigzag_layout ? " zigzag" : "");
  std::string q = absl::StrFormat("%s[1, %d, %d@%s, %d]", c.dtype, c.heads, c.queries, split, c.head_dim);
  std::string kv = absl::StrFormat("%s[1, %d, %d@%s, %d]", c.dtype, c.kv_heads, c.keys, split, c.head_dim);
  std::string attrs = c.causal ? " {causal}" : "";
  return absl::StrCat("mesh @m(", mesh_axes, ")\n\nfunc @attn_grad(%q: ", q, ", %k: ", kv,
                      ", %v: ", kv, ", %do: ", q, ") -> (", q, ", ", kv, ", ", kv, ") {\n",
                      "  %o, %lse = attention(%q, %k, %v)", attrs, "\n",
                      "  %dq, %dk, %dv = attention_grad(%q, %k, %v, %o, %lse, %do)", attrs, "\n",
                      "  return %dq, %dk, %dv\n}\n");
}

// @attn_grad on mesh @m(sp=devices), the sequence split over sp.
inline std::string GlobalAttentionGrad(const AttentionCase& c) {
  return GlobalAttentionGradOnMesh(c, absl::StrCat("sp=", c.devices), "sp");
}

// How many printed lines contain `needle`.
inline int CountLines(absl::string_view text, absl::string_view needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) count += absl::StrContains(line, needle);
  return count;
}

// Every line with `needle` also carries `stream = 1`.
inline bool AllOnSideStream(absl::string_view text, absl::string_view needle) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle) && !absl::StrContains(line, "stream = 1")) return false;
  }
  return true;
}

// No line without a collective names a stream: compute stays on the main stream.
inline bool ComputeOnMainStream(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    bool collective = absl::StrContains(line, "shift(") || absl::StrContains(line, "all_to_all(");
    if (!collective && absl::StrContains(line, "stream")) return false;
  }
  return true;
}

}  // namespace commir::schedules::testing

#endif  // COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_TEST_PROGRAMS_H_
