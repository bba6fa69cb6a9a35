#include "search/plan/layer_program.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/attribute.h"
#include "commir/builder.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "search/plan/megatron_layout.h"

namespace commir::search::plan {

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

absl::Status CheckLayerLayout(const ModelSpec& m, const LayerLayout& l) {
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
  if (m.attention == AttentionKind::kUnfused && l.cp > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cp=", l.cp, ": attention=unfused has no context parallelism (its score matrix "
        "needs every key; Megatron-LM's context parallelism runs a fused attention)"));
  }
  const int64_t seq_split = l.cp * (l.sequence_parallel ? l.tp : 1);
  if (m.sequence % seq_split != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sequence ", m.sequence, " does not split into ", seq_split));
  }
  return CheckMicroBatch(m, l.micro_batch);
}

namespace {

// A module holding one global function `name` on no mesh, with the given arguments
// (name, type) and one result, its body left to `build` (an OpBuilder at its end, the
// arguments by name). Built in memory: ops get their types from their definitions.
template <typename Build>
absl::StatusOr<std::unique_ptr<Module>> BuildFunction(
    absl::string_view name, const std::vector<std::pair<std::string, Type>>& args,
    Type result_type, Build build) {
  auto module = std::make_unique<Module>();
  std::vector<Type> arg_types;
  std::vector<std::string> arg_names;
  for (const auto& [arg, type] : args) {
    arg_names.push_back(arg);
    arg_types.push_back(type);
  }
  Function* f = AddFunction(*module, std::string(name), /*spmd=*/false, /*mesh=*/nullptr,
                            arg_types, {result_type}, arg_names);
  absl::flat_hash_map<std::string, Value*> arg_values;
  for (int i = 0; i < f->body()->num_arguments(); ++i) {
    arg_values[arg_names[i]] = f->body()->argument(i);
  }
  OpBuilder b(f);
  Value* out = build(b, [&](const std::string& arg) { return arg_values.at(arg); });
  if (!b.ok()) {
    return absl::InternalError(absl::StrCat("building @", name, ": ", b.status().message()));
  }
  b.Return({out});
  return module;
}

// Self-attention as pre-FlashAttention Megatron-LM computed it, from the ops the cpu
// backend, autodiff and the sim share: q scaled by 1/sqrt(d) (Megatron-LM folds the scale
// into the score GEMM or the softmax kernel; here it is an op on q, s/d times smaller than
// the scores), the [b, heads, s, s] scores by a batched GEMM, a softmax over the keys,
// and the probabilities times v by a batched GEMM. Left out, documented in the header:
// the causal mask (Megatron-LM's fused kernel masks inside the softmax it runs anyway, and
// its GEMMs compute the whole s x s: the mask changes values, not the work or the bytes;
// there is no op to build the triangle from) and the dropout on the probabilities (no
// random op).
Value* UnfusedAttention(OpBuilder& b, const ModelSpec& m, Value* qh, Value* kh, Value* vh) {
  const Type scalar = Type::Scalar(m.dtype);
  const double scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim()));
  Value* qs = b.Op(OpKind::kMul, {qh, OpBuilder::Operand::Literal(scale, scalar)}, {},
                   std::nullopt, "qs");
  AttrDict transpose_b;
  transpose_b.Set("transpose_b", Attribute::Bool(true));
  Value* scores = b.Op(OpKind::kMatmul, {qs, kh}, transpose_b, std::nullopt, "scores");
  Value* probs = b.Op(OpKind::kSoftmax, {scores}, {}, std::nullopt, "probs");
  return b.Op(OpKind::kMatmul, {probs, vh}, {}, std::nullopt, "oh");
}

// The width of Megatron-LM's fused QKV weight: per key/value head (query group), the
// group's query heads, its key head and its value head.
int64_t QkvColumns(const ModelSpec& m) {
  return m.kv_heads * (m.heads / m.kv_heads + 2) * m.head_dim();
}

struct HeadsFirst {
  Value* q;
  Value* k;
  Value* v;
};

// q, k and v as Megatron-LM's `linear_qkv` computes them: one GEMM of the norm's output
// by one weight whose columns are grouped per key/value head (each group's heads/kv_heads
// query heads, then its key head, then its value head), so that a column split over tp
// gives every rank whole groups and the split into q, k and v needs no communication.
// Its output [b, s, groups, (g + 2) d] is put heads-first once ([b, groups, s, (g + 2) d],
// the one transpose the three separate projections had as three), and k and v are
// column blocks of it, read by the attention in place (runtime/in_place.h:
// SliceReadInPlace, as FlashAttention reads strided q, k and v). With one query head
// per group (multi-head attention) q is such a block too. With several, a group's
// query block [b, groups, s, g d] is split into its heads and put heads-first: a copy,
// as Megatron-LM's reshape of the query split out of `linear_qkv` is one.
HeadsFirst FusedQkv(OpBuilder& b, const ModelSpec& m, int64_t B, Value* h, Value* wqkv) {
  auto type = [&](std::vector<int64_t> dims) { return Type::Tensor(m.dtype, std::move(dims)); };
  const int64_t S = m.sequence, d = m.head_dim(), kv = m.kv_heads, g = m.heads / m.kv_heads;
  auto attrs = [](const char* name, std::vector<int64_t> v) {
    AttrDict a;
    a.Set(name, Attribute::IntList(std::move(v)));
    return a;
  };
  // Columns [first, first + width) of each group's (g + 2) d.
  auto columns = [&](Value* from, int64_t first, int64_t width, const char* name) {
    AttrDict a = attrs("start", {0, 0, 0, first});
    a.Set("size", Attribute::IntList({B, kv, S, width}));
    return b.Op(OpKind::kSlice, {from}, std::move(a), std::nullopt, name);
  };
  Value* qkv = b.Op(OpKind::kMatmul, {h, wqkv}, {}, std::nullopt, "qkv");
  Value* groups = b.Op(OpKind::kReshape, {qkv}, {}, type({B, S, kv, (g + 2) * d}), "qkv4");
  Value* heads_first = b.Op(OpKind::kTranspose, {groups}, attrs("perm", {0, 2, 1, 3}),
                            std::nullopt, "qkvh");
  Value* qh = nullptr;
  if (g == 1) {
    qh = columns(heads_first, 0, d, "qh");
  } else {
    Value* qg = columns(heads_first, 0, g * d, "qg");
    Value* q5 = b.Op(OpKind::kReshape, {qg}, {}, type({B, kv, S, g, d}), "q5");
    Value* q5t =
        b.Op(OpKind::kTranspose, {q5}, attrs("perm", {0, 1, 3, 2, 4}), std::nullopt, "q5t");
    qh = b.Op(OpKind::kReshape, {q5t}, {}, type({B, m.heads, S, d}), "qh");
  }
  return {qh, columns(heads_first, g * d, d, "kh"), columns(heads_first, (g + 1) * d, d, "vh")};
}

// The single-device layer: the one definition of the layer's ops, which the model
// written as CommIR calls and megatron_layout.h lays out for the plan search.
absl::StatusOr<std::unique_ptr<Module>> LayerFunction(const ModelSpec& m, int64_t micro_batch) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const int64_t d = m.head_dim();
  auto type = [&](std::vector<int64_t> dims) { return Type::Tensor(m.dtype, std::move(dims)); };
  const int64_t B = micro_batch, S = m.sequence, H = m.hidden;
  const Type x = type({B, S, H});
  const Type vec = type({H});

  std::vector<std::pair<std::string, Type>> args = {{"x", x}, {"g1", vec}};
  if (gpt) args.push_back({"b1", vec});
  args.insert(args.end(), {{"wqkv", type({H, QkvColumns(m)})},
                           {"wo", type({m.heads * d, H})},
                           {"g2", vec}});
  if (gpt) {
    args.insert(args.end(), {{"b2", vec}, {"w1", type({H, m.ffn})}, {"w2", type({m.ffn, H})}});
  } else {
    args.insert(args.end(),
                {{"w1", type({H, m.ffn})}, {"w3", type({H, m.ffn})}, {"w2", type({m.ffn, H})}});
  }
  return BuildFunction(kLayerFunction, args, x, [&](OpBuilder& b, auto arg) {
    auto norm = [&](Value* in, const char* g, const char* bias, const char* name) {
      return gpt ? b.Op(OpKind::kLayerNorm, {in, arg(g), arg(bias)}, {}, std::nullopt, name)
                 : b.Op(OpKind::kRmsNorm, {in, arg(g)}, {}, std::nullopt, name);
    };
    AttrDict heads_first;
    heads_first.Set("perm", Attribute::IntList({0, 2, 1, 3}));
    AttrDict causal;
    causal.Set("causal", Attribute::Bool(true));
    Value* h = norm(arg("x"), "g1", "b1", "h");
    const auto [qh, kh, vh] = FusedQkv(b, m, B, h, arg("wqkv"));
    Value* oh = m.attention == AttentionKind::kUnfused
                    ? UnfusedAttention(b, m, qh, kh, vh)
                    : b.Op(OpKind::kAttention, {qh, kh, vh}, causal, std::nullopt, "oh");
    Value* ot = b.Op(OpKind::kTranspose, {oh}, heads_first, std::nullopt, "ot");
    Value* o = b.Op(OpKind::kReshape, {ot}, {}, type({B, S, m.heads * d}), "o");
    Value* y = b.Op(OpKind::kMatmul, {o, arg("wo")}, {}, std::nullopt, "y");
    Value* r = b.Op(OpKind::kAdd, {arg("x"), y}, {}, std::nullopt, "r");
    Value* h2 = norm(r, "g2", "b2", "h2");
    Value* u = b.Op(OpKind::kMatmul, {h2, arg("w1")}, {}, std::nullopt, "u");
    Value* a = nullptr;
    if (gpt) {
      a = b.Op(OpKind::kGelu, {u}, {}, std::nullopt, "a");
    } else {
      Value* w = b.Op(OpKind::kMatmul, {h2, arg("w3")}, {}, std::nullopt, "w");
      Value* s = b.Op(OpKind::kSilu, {u}, {}, std::nullopt, "s");
      a = b.Op(OpKind::kMul, {s, w}, {}, std::nullopt, "a");
    }
    Value* dn = b.Op(OpKind::kMatmul, {a, arg("w2")}, {}, std::nullopt, "dn");
    return b.Op(OpKind::kAdd, {r, dn}, {}, std::nullopt, "out");
  });
}

// The single-device head over the model's own vocabulary: the final norm, the logits
// and the loss. GPT's output weight is the embedding's table [vocabulary, hidden]
// (`transpose_b`), so that a model ties the two by passing one value; Llama's is its own
// [hidden, vocabulary]. The loss is the mean over the micro-batch's tokens of
// cross_entropy's per-token losses, written as their sum times 1 / tokens (Megatron-LM's
// loss: the per-token losses summed and divided by the token count), so that a token
// split (cp) sums locally and all-reduces one scalar rather than gathering the logits.
absl::StatusOr<std::unique_ptr<Module>> HeadFunction(const ModelSpec& m, int64_t micro_batch) {
  const bool gpt = m.architecture == Architecture::kGpt;
  const Type x = Type::Tensor(m.dtype, {micro_batch, m.sequence, m.hidden});
  const Type vec = Type::Tensor(m.dtype, {m.hidden});
  std::vector<std::pair<std::string, Type>> args = {{"x", x}, {"g", vec}};
  if (gpt) {
    args.push_back({"b", vec});
    args.push_back({"wemb", Type::Tensor(m.dtype, {m.vocabulary, m.hidden})});
  } else {
    args.push_back({"wout", Type::Tensor(m.dtype, {m.hidden, m.vocabulary})});
  }
  args.push_back({"labels", Type::Tensor(kLabelType, {micro_batch, m.sequence})});
  const double per_token = 1.0 / static_cast<double>(micro_batch * m.sequence);
  return BuildFunction(kHeadFunction, args, Type::Scalar(m.dtype), [&](OpBuilder& b, auto arg) {
    Value* h = gpt ? b.Op(OpKind::kLayerNorm, {arg("x"), arg("g"), arg("b")}, {}, std::nullopt, "h")
                   : b.Op(OpKind::kRmsNorm, {arg("x"), arg("g")}, {}, std::nullopt, "h");
    AttrDict tied;
    if (gpt) tied.Set("transpose_b", Attribute::Bool(true));
    Value* l = b.Op(OpKind::kMatmul, {h, arg(gpt ? "wemb" : "wout")}, std::move(tied),
                    std::nullopt, "l");
    AttrDict per_token_losses;
    per_token_losses.Set("reduction", Attribute::Ident("none"));
    std::vector<Value*> ce = b.Ops(OpKind::kCrossEntropy, {l, arg("labels")},
                                   std::move(per_token_losses), 2, {"tok", "lse"});
    if (!b.ok()) return static_cast<Value*>(nullptr);
    AttrDict all;
    all.Set("dims", Attribute::IntList({0, 1}));
    Value* sum = b.Op(OpKind::kReduceSum, {ce[0]}, std::move(all), std::nullopt, "sum");
    return b.Op(OpKind::kMul, {sum, OpBuilder::Operand::Literal(per_token, Type::Scalar(m.dtype))},
                {}, std::nullopt, "loss");
  });
}

}  // namespace

int64_t PaddedVocabulary(int64_t vocabulary, int64_t tp) {
  const int64_t multiple = 128 * tp;
  return (vocabulary + multiple - 1) / multiple * multiple;
}

// One way to lay out a layer: the single-device function through the Megatron layout.
absl::StatusOr<std::unique_ptr<Module>> TransformerLayerProgram(const ModelSpec& m,
                                                               const LayerLayout& l) {
  if (absl::Status s = CheckLayerLayout(m, l); !s.ok()) return s;
  MegatronLayoutOptions o;
  o.layout = l;
  absl::StatusOr<std::unique_ptr<Module>> layer = LayerFunction(m, l.micro_batch);
  if (!layer.ok()) return layer.status();
  return MegatronLayoutModule(*(*layer)->FindFunction(kLayerFunction), o);
}

absl::StatusOr<std::unique_ptr<Module>> HeadProgram(const ModelSpec& m, const LayerLayout& l) {
  if (absl::Status s = CheckLayerLayout(m, l); !s.ok()) return s;
  MegatronLayoutOptions o;
  o.layout = l;
  o.vocabulary = m.vocabulary;
  absl::StatusOr<std::unique_ptr<Module>> head = HeadFunction(m, l.micro_batch);
  if (!head.ok()) return head.status();
  return MegatronLayoutModule(*(*head)->FindFunction(kHeadFunction), o);
}

absl::StatusOr<std::unique_ptr<Module>> SingleDeviceLayer(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return LayerFunction(m, micro_batch);
}

absl::StatusOr<std::unique_ptr<Module>> SingleDeviceHead(const ModelSpec& m, int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return HeadFunction(m, micro_batch);
}

}  // namespace commir::search::plan
