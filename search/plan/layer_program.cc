#include "search/plan/layer_program.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "commir/element_type.h"

namespace commir::search::plan {
namespace {

// `n` split over `axes` as written in a type: 4096, 4096@tp, 4096@(cp,tp).
std::string Dim(int64_t n, const std::vector<std::string>& axes) {
  if (axes.empty()) return absl::StrCat(n);
  if (axes.size() == 1) return absl::StrCat(n, "@", axes[0]);
  return absl::StrCat(n, "@(", absl::StrJoin(axes, ","), ")");
}

struct Axes {
  int64_t tp_size = 1;
  std::vector<std::string> tp;        // {"tp"} or {}
  std::vector<std::string> cp;        // {"cp"} or {}
  std::vector<std::string> residual;  // the residual stream's sequence
  std::string mesh;                   // "mesh @m(cp=2, tp=4)\n\n" or ""
};

Axes MakeAxes(const LayerLayout& l) {
  Axes a;
  a.tp_size = l.tp;
  std::vector<std::string> mesh_axes;
  if (l.cp > 1) {
    a.cp = {"cp"};
    mesh_axes.push_back(absl::StrCat("cp=", l.cp));
  }
  if (l.tp > 1) {
    a.tp = {"tp"};
    // tp is the mesh's last (fastest-varying) axis, so a tp group is adjacent devices
    // on one node, as Megatron-LM orders its ranks.
    mesh_axes.push_back(absl::StrCat("tp=", l.tp));
  }
  a.residual = a.cp;
  if (l.sequence_parallel) a.residual.insert(a.residual.end(), a.tp.begin(), a.tp.end());
  if (!mesh_axes.empty())
    a.mesh = absl::StrCat("mesh @m(", absl::StrJoin(mesh_axes, ", "), ")\n\n");
  return a;
}

absl::Status CheckLayout(const ModelSpec& m, const LayerLayout& l) {
  if (l.tp < 1 || l.cp < 1 || l.micro_batch < 1) {
    return absl::InvalidArgumentError("tp, cp and the micro-batch must be at least 1");
  }
  if (l.sequence_parallel && l.tp == 1) {
    return absl::InvalidArgumentError("sequence parallelism needs tp > 1");
  }
  if (m.heads % l.tp != 0 || m.ffn % l.tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tp=", l.tp, " does not divide the ", m.heads,
                                                   " heads and the FFN width ", m.ffn));
  }
  const int64_t seq_split = l.cp * (l.sequence_parallel ? l.tp : 1);
  if (m.sequence % seq_split != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sequence ", m.sequence, " does not split into ", seq_split));
  }
  return Validate(m);
}

}  // namespace

int64_t PaddedVocabulary(int64_t vocabulary, int64_t tp) {
  const int64_t multiple = 128 * tp;
  return (vocabulary + multiple - 1) / multiple * multiple;
}


namespace {

// The layer's function on the axes `a` (none: the single-device layer). One generator
// for both, so the model written as CommIR (model_program.h) and the programs the plan
// search costs hold the same layer.
FunctionText LayerFunction(const ModelSpec& m, int64_t micro_batch, const Axes& a) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const int64_t d = m.head_dim();
  // Key/value heads that tp does not divide stay whole (replicated).
  const bool kv_split = m.kv_heads % a.tp_size == 0;
  const std::vector<std::string> kv_axes = kv_split ? a.tp : std::vector<std::string>{};
  const std::string t(ElementTypeName(m.dtype));
  const std::string B = absl::StrCat(micro_batch);
  const std::string H = absl::StrCat(m.hidden);
  auto type = [&](const std::vector<std::string>& dims) {
    return absl::StrCat(t, "[", absl::StrJoin(dims, ", "), "]");
  };
  const std::string x = type({B, Dim(m.sequence, a.residual), H});
  const std::string gathered = type({B, Dim(m.sequence, a.cp), H});  // inside a block
  const std::string vec = type({H});
  const std::string q_cols = Dim(m.heads * d, a.tp);
  const std::string kv_cols = Dim(m.kv_heads * d, kv_axes);
  const std::string ffn_cols = Dim(m.ffn, a.tp);

  FunctionText f;
  f.name = kLayerFunction;
  f.result_type = x;
  f.args = {{"x", x}, {"g1", vec}};
  if (gpt) f.args.push_back({"b1", vec});
  f.args.insert(f.args.end(), {{"wq", type({H, q_cols})},
                               {"wk", type({H, kv_cols})},
                               {"wv", type({H, kv_cols})},
                               {"wo", type({Dim(m.heads * d, a.tp), H})},
                               {"g2", vec}});
  if (gpt) {
    f.args.insert(f.args.end(), {{"b2", vec},
                                 {"w1", type({H, ffn_cols})},
                                 {"w2", type({Dim(m.ffn, a.tp), H})}});
  } else {
    f.args.insert(f.args.end(), {{"w1", type({H, ffn_cols})},
                                 {"w3", type({H, ffn_cols})},
                                 {"w2", type({Dim(m.ffn, a.tp), H})}});
  }
  const std::string norm1 = gpt ? "layernorm(%x, %g1, %b1)" : "rmsnorm(%x, %g1)";
  const std::string norm2 = gpt ? "layernorm(%r, %g2, %b2)" : "rmsnorm(%r, %g2)";
  const std::string seq_cp = Dim(m.sequence, a.cp);
  f.body = absl::StrCat(
      "  %h = ", norm1, " : ", gathered, "\n",
      "  %q = matmul(%h, %wq) : ", type({B, seq_cp, q_cols}), "\n",
      "  %k = matmul(%h, %wk) : ", type({B, seq_cp, kv_cols}), "\n",
      "  %v = matmul(%h, %wv) : ", type({B, seq_cp, kv_cols}), "\n",
      "  %q4 = reshape(%q) : ", type({B, seq_cp, Dim(m.heads, a.tp), absl::StrCat(d)}), "\n",
      "  %k4 = reshape(%k) : ", type({B, seq_cp, Dim(m.kv_heads, kv_axes), absl::StrCat(d)}), "\n",
      "  %v4 = reshape(%v) : ", type({B, seq_cp, Dim(m.kv_heads, kv_axes), absl::StrCat(d)}), "\n",
      "  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}\n",
      "  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}\n",
      "  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}\n",
      "  %oh = attention(%qh, %kh, %vh) {causal}\n",
      "  %ot = transpose(%oh) {perm = [0, 2, 1, 3]}\n",
      "  %o = reshape(%ot) : ", type({B, seq_cp, q_cols}), "\n", "  %y = matmul(%o, %wo) : ", x,
      "\n", "  %r = add(%x, %y)\n", "  %h2 = ", norm2, " : ", gathered, "\n");
  if (gpt) {
    absl::StrAppend(&f.body, "  %u = matmul(%h2, %w1) : ", type({B, seq_cp, ffn_cols}), "\n",
                    "  %a = gelu(%u)\n");
  } else {
    absl::StrAppend(&f.body, "  %u = matmul(%h2, %w1) : ", type({B, seq_cp, ffn_cols}), "\n",
                    "  %w = matmul(%h2, %w3) : ", type({B, seq_cp, ffn_cols}), "\n",
                    "  %s = silu(%u)\n", "  %a = mul(%s, %w)\n");
  }
  absl::StrAppend(&f.body, "  %dn = matmul(%a, %w2) : ", x, "\n", "  %out = add(%r, %dn)\n",
                  "  return %out\n");
  return f;
}

// The head's function on the axes `a` over a vocabulary of `vocab` (padded or not).
FunctionText HeadFunction(const ModelSpec& m, int64_t micro_batch, const Axes& a, int64_t vocab) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const std::string t(ElementTypeName(m.dtype));
  const std::string x =
      absl::StrCat(t, "[", micro_batch, ", ", Dim(m.sequence, a.residual), ", ", m.hidden, "]");
  const std::string gathered =
      absl::StrCat(t, "[", micro_batch, ", ", Dim(m.sequence, a.cp), ", ", m.hidden, "]");
  const std::string logits =
      absl::StrCat(t, "[", micro_batch, ", ", Dim(m.sequence, a.cp), ", ", Dim(vocab, a.tp), "]");
  const std::string vec = absl::StrCat(t, "[", m.hidden, "]");
  FunctionText f;
  f.name = kHeadFunction;
  f.result_type = logits;
  f.args = {{"x", x}, {"g", vec}};
  if (gpt) f.args.push_back({"b", vec});
  f.args.push_back({"wout", absl::StrCat(t, "[", m.hidden, ", ", Dim(vocab, a.tp), "]")});
  f.body = absl::StrCat("  %h = ", gpt ? "layernorm(%x, %g, %b)" : "rmsnorm(%x, %g)", " : ",
                        gathered, "\n", "  %l = matmul(%h, %wout) : ", logits, "\n",
                        "  %p = softmax(%l) : ", logits, "\n", "  return %p\n");
  return f;
}

absl::Status CheckMicroBatch(const ModelSpec& m, int64_t micro_batch) {
  if (micro_batch < 1) return absl::InvalidArgumentError("the micro-batch must be at least 1");
  return Validate(m);
}

}  // namespace

std::string FunctionText::Print() const {
  std::vector<std::string> parts;
  parts.reserve(args.size());
  for (const auto& [arg, type] : args) parts.push_back(absl::StrCat("%", arg, ": ", type));
  return absl::StrCat("func @", name, "(", absl::StrJoin(parts, ", "), ") -> ", result_type,
                      " {\n", body, "}\n");
}

absl::StatusOr<std::string> TransformerLayerProgram(const ModelSpec& m, const LayerLayout& l) {
  if (absl::Status s = CheckLayout(m, l); !s.ok()) return s;
  const Axes a = MakeAxes(l);
  return absl::StrCat(a.mesh, LayerFunction(m, l.micro_batch, a).Print());
}

absl::StatusOr<std::string> HeadProgram(const ModelSpec& m, const LayerLayout& l) {
  if (absl::Status s = CheckLayout(m, l); !s.ok()) return s;
  const Axes a = MakeAxes(l);
  return absl::StrCat(a.mesh,
                      HeadFunction(m, l.micro_batch, a, PaddedVocabulary(m.vocabulary, l.tp)).Print());
}

absl::StatusOr<FunctionText> SingleDeviceLayer(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return LayerFunction(m, micro_batch, Axes{});
}

absl::StatusOr<FunctionText> SingleDeviceHead(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return HeadFunction(m, micro_batch, Axes{}, m.vocabulary);
}

}  // namespace commir::search::plan
