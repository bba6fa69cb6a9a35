#include "search/plan/layer_program.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/element_type.h"
#include "search/plan/megatron_layout.h"

namespace commir::search::plan {
namespace {

absl::Status CheckMicroBatch(const ModelSpec& m, int64_t micro_batch) {
  if (micro_batch < 1) return absl::InvalidArgumentError("the micro-batch must be at least 1");
  if (absl::Status s = Validate(m); !s.ok()) return s;
  // Bounded like the global batch, so that the layer's tensors stay far inside int64.
  if (micro_batch > kMaxGlobalBatch || micro_batch * m.sequence > kMaxTokensPerIteration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the micro-batch ", micro_batch, " is too large (at most ", kMaxGlobalBatch,
        " sequences and ", kMaxTokensPerIteration, " tokens)"));
  }
  return absl::OkStatus();
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
  return CheckMicroBatch(m, l.micro_batch);
}

// The single-device layer: the one definition of the layer's ops, which the model
// written as CommIR calls and megatron_layout.h lays out for the plan search.
FunctionText LayerFunction(const ModelSpec& m, int64_t micro_batch) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const int64_t d = m.head_dim();
  const std::string t(ElementTypeName(m.dtype));
  auto type = [&](std::vector<int64_t> dims) {
    return absl::StrCat(t, "[", absl::StrJoin(dims, ", "), "]");
  };
  const int64_t B = micro_batch, S = m.sequence, H = m.hidden;
  const std::string x = type({B, S, H});
  const std::string vec = type({H});

  FunctionText f;
  f.name = kLayerFunction;
  f.result_type = x;
  f.args = {{"x", x}, {"g1", vec}};
  if (gpt) f.args.push_back({"b1", vec});
  f.args.insert(f.args.end(), {{"wq", type({H, m.heads * d})},
                               {"wk", type({H, m.kv_heads * d})},
                               {"wv", type({H, m.kv_heads * d})},
                               {"wo", type({m.heads * d, H})},
                               {"g2", vec}});
  if (gpt) {
    f.args.insert(f.args.end(), {{"b2", vec}, {"w1", type({H, m.ffn})}, {"w2", type({m.ffn, H})}});
  } else {
    f.args.insert(f.args.end(),
                  {{"w1", type({H, m.ffn})}, {"w3", type({H, m.ffn})}, {"w2", type({m.ffn, H})}});
  }
  const std::string norm1 = gpt ? "layernorm(%x, %g1, %b1)" : "rmsnorm(%x, %g1)";
  const std::string norm2 = gpt ? "layernorm(%r, %g2, %b2)" : "rmsnorm(%r, %g2)";
  f.body = absl::StrCat(
      "  %h = ", norm1, " : ", x, "\n", "  %q = matmul(%h, %wq) : ", type({B, S, m.heads * d}),
      "\n", "  %k = matmul(%h, %wk) : ", type({B, S, m.kv_heads * d}), "\n",
      "  %v = matmul(%h, %wv) : ", type({B, S, m.kv_heads * d}), "\n",
      "  %q4 = reshape(%q) : ", type({B, S, m.heads, d}), "\n",
      "  %k4 = reshape(%k) : ", type({B, S, m.kv_heads, d}), "\n",
      "  %v4 = reshape(%v) : ", type({B, S, m.kv_heads, d}), "\n",
      "  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}\n",
      "  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}\n",
      "  %vh = transpose(%v4) {perm = [0, 2, 1, 3]}\n",
      "  %oh = attention(%qh, %kh, %vh) {causal}\n",
      "  %ot = transpose(%oh) {perm = [0, 2, 1, 3]}\n",
      "  %o = reshape(%ot) : ", type({B, S, m.heads * d}), "\n", "  %y = matmul(%o, %wo) : ", x,
      "\n", "  %r = add(%x, %y)\n", "  %h2 = ", norm2, " : ", x, "\n",
      "  %u = matmul(%h2, %w1) : ", type({B, S, m.ffn}), "\n");
  if (gpt) {
    absl::StrAppend(&f.body, "  %a = gelu(%u)\n");
  } else {
    absl::StrAppend(&f.body, "  %w = matmul(%h2, %w3) : ", type({B, S, m.ffn}), "\n",
                    "  %s = silu(%u)\n", "  %a = mul(%s, %w)\n");
  }
  absl::StrAppend(&f.body, "  %dn = matmul(%a, %w2) : ", x, "\n", "  %out = add(%r, %dn)\n",
                  "  return %out\n");
  return f;
}

// The single-device head over the model's own vocabulary.
FunctionText HeadFunction(const ModelSpec& m, int64_t micro_batch) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const std::string t(ElementTypeName(m.dtype));
  const std::string x = absl::StrCat(t, "[", micro_batch, ", ", m.sequence, ", ", m.hidden, "]");
  const std::string logits =
      absl::StrCat(t, "[", micro_batch, ", ", m.sequence, ", ", m.vocabulary, "]");
  const std::string vec = absl::StrCat(t, "[", m.hidden, "]");
  FunctionText f;
  f.name = kHeadFunction;
  f.result_type = logits;
  f.args = {{"x", x}, {"g", vec}};
  if (gpt) f.args.push_back({"b", vec});
  f.args.push_back({"wout", absl::StrCat(t, "[", m.hidden, ", ", m.vocabulary, "]")});
  f.body = absl::StrCat("  %h = ", gpt ? "layernorm(%x, %g, %b)" : "rmsnorm(%x, %g)", " : ", x,
                        "\n", "  %l = matmul(%h, %wout) : ", logits, "\n",
                        "  %p = softmax(%l) : ", logits, "\n", "  return %p\n");
  return f;
}

}  // namespace

int64_t PaddedVocabulary(int64_t vocabulary, int64_t tp) {
  const int64_t multiple = 128 * tp;
  return (vocabulary + multiple - 1) / multiple * multiple;
}

std::string FunctionText::Print() const {
  std::vector<std::string> parts;
  parts.reserve(args.size());
  for (const auto& [arg, type] : args) parts.push_back(absl::StrCat("%", arg, ": ", type));
  return absl::StrCat("func @", name, "(", absl::StrJoin(parts, ", "), ") -> ", result_type, " {\n",
                      body, "}\n");
}

// One way to lay out a layer: the single-device function through the Megatron layout.
absl::StatusOr<std::string> TransformerLayerProgram(const ModelSpec& m, const LayerLayout& l) {
  if (absl::Status s = CheckLayout(m, l); !s.ok()) return s;
  MegatronLayoutOptions o;
  o.layout = l;
  return MegatronLayoutText(LayerFunction(m, l.micro_batch).Print(), o);
}

absl::StatusOr<std::string> HeadProgram(const ModelSpec& m, const LayerLayout& l) {
  if (absl::Status s = CheckLayout(m, l); !s.ok()) return s;
  MegatronLayoutOptions o;
  o.layout = l;
  o.vocabulary = m.vocabulary;
  return MegatronLayoutText(HeadFunction(m, l.micro_batch).Print(), o);
}

absl::StatusOr<FunctionText> SingleDeviceLayer(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return LayerFunction(m, micro_batch);
}

absl::StatusOr<FunctionText> SingleDeviceHead(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return HeadFunction(m, micro_batch);
}

}  // namespace commir::search::plan
