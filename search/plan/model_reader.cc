#include "search/plan/model_reader.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/element_type.h"
#include "search/plan/megatron_layout.h"

namespace commir::search::plan {
namespace {

std::string Where(absl::string_view file, Location loc) {
  return absl::StrCat(file, ":", loc.line, ":", loc.col, ": ");
}

const std::string& Callee(const Operation& call) {
  return call.attrs().Find("callee")->string_value();
}

std::vector<Operation*> OpsOf(const Function& f, OpKind kind) {
  std::vector<Operation*> ops;
  WalkOps(f.body(), [&](Operation* op) {
    if (op->Is(kind)) ops.push_back(op);
  });
  return ops;
}

// Neither a mesh nor a layout: the plan search lays the function out itself.
bool Unannotated(const Function& f) {
  if (f.is_spmd() || f.mesh() != nullptr) return false;
  bool plain = true;
  auto check = [&](Type t) {
    if (!t.is_tensor()) return;
    for (const AxisList& axes : t.dim_axes()) plain = plain && axes.empty();
    plain = plain && t.partial().empty();
  };
  for (Type t : f.arg_types()) check(t);
  for (Type t : f.result_types()) check(t);
  WalkOps(f.body(), [&](Operation* op) {
    for (Value* r : op->results()) check(r->type());
  });
  return plain;
}

// Pre-FlashAttention Megatron-LM's attention as separate ops (layer_program.h's
// attention=unfused): the scores, a batched matmul of q and k^T ([b, heads, s, d] x
// [b, heads, s, d] with transpose_b), their softmax, and a batched matmul of the
// probabilities with v. The scores' matmuls, one per such attention.
std::vector<Operation*> UnfusedAttentionScores(const Function& f) {
  std::vector<Operation*> found;
  for (Operation* softmax : OpsOf(f, OpKind::kSoftmax)) {
    Operation* scores = softmax->operand(0)->defining_op();
    if (scores == nullptr || !scores->Is(OpKind::kMatmul) || scores->num_operands() != 2 ||
        scores->result(0)->type().rank() != 4 || scores->operand(0)->type().rank() != 4 ||
        scores->operand(1)->type().rank() != 4) {
      continue;
    }
    const Attribute* transpose_b = scores->attrs().Find("transpose_b");
    if (transpose_b == nullptr || transpose_b->kind() != Attribute::Kind::kBool ||
        !transpose_b->bool_value()) {
      continue;
    }
    bool times_v = false;
    for (const Operation* user : softmax->result(0)->users()) {
      times_v = times_v || (user->Is(OpKind::kMatmul) && user->num_operands() == 2 &&
                            user->operand(0) == softmax->result(0) &&
                            user->result(0)->type().rank() == 4);
    }
    if (times_v) found.push_back(scores);
  }
  return found;
}

struct LayerSizes {
  Architecture architecture;
  AttentionKind attention = AttentionKind::kFlash;
  int64_t micro_batch, sequence, hidden, heads, kv_heads, head_dim, ffn;
  ElementType dtype;
};

absl::StatusOr<LayerSizes> ReadLayer(const Function& f, absl::string_view file) {
  const std::string at = Where(file, f.loc());
  auto missing = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, "@", f.name(), " is not a pre-norm attention + MLP transformer layer the plan search ",
        "can lay out: ", what));
  };
  if (!Unannotated(f)) {
    return missing("it has a mesh or layouts (write the layer for one device)");
  }
  if (f.arg_types().empty() || f.arg_types()[0].rank() != 3) {
    return missing("its first argument is not the residual stream [micro_batch, seq, hidden]");
  }
  if (f.result_types().size() != 1 || f.result_types()[0] != f.arg_types()[0]) {
    return missing("it does not return one value of its first argument's type");
  }
  LayerSizes s;
  const Type x = f.arg_types()[0];
  // Before any size divides anything (a micro-batch of 0 would divide the global batch).
  for (int64_t d : x.dims()) {
    if (d < 1) {
      return missing(absl::StrCat("its residual stream [micro_batch, seq, hidden] is [",
                                  absl::StrJoin(x.dims(), ", "),
                                  "]: every size must be at least 1"));
    }
  }
  s.micro_batch = x.dims()[0];
  s.sequence = x.dims()[1];
  s.hidden = x.dims()[2];
  s.dtype = x.element_type();

  const std::vector<Operation*> attention = OpsOf(f, OpKind::kAttention);
  const std::vector<Operation*> unfused = UnfusedAttentionScores(f);
  if (attention.size() + unfused.size() != 1) {
    if (unfused.empty()) {
      return missing(absl::StrCat("it has ", attention.size(), " attention ops, not one"));
    }
    return missing(absl::StrCat("it has ", attention.size(), " attention ops and ",
                                unfused.size(),
                                " unfused attentions (q k^T, softmax, times v), not one in all"));
  }
  // The fused op's q and k, or the unfused scores' (q possibly scaled first: the scale
  // keeps its type).
  const Operation* qk = attention.empty() ? unfused[0] : attention[0];
  s.attention = attention.empty() ? AttentionKind::kUnfused : AttentionKind::kFlash;
  const Type q = qk->operand(0)->type(), k = qk->operand(1)->type();
  if (q.rank() != 4 || k.rank() != 4) {
    return missing("the attention's q and k are not [batch, heads, seq, head_dim]");
  }
  s.heads = q.dims()[1];
  s.kv_heads = k.dims()[1];
  s.head_dim = q.dims()[3];
  if (s.heads * s.head_dim != s.hidden) {
    return missing(absl::StrCat("heads x head_dim (", s.heads, " x ", s.head_dim,
                                ") is not the hidden size ", s.hidden));
  }

  const bool layernorm = !OpsOf(f, OpKind::kLayerNorm).empty();
  const bool rmsnorm = !OpsOf(f, OpKind::kRmsNorm).empty();
  const std::vector<Operation*> gelu = OpsOf(f, OpKind::kGelu);
  const std::vector<Operation*> silu = OpsOf(f, OpKind::kSilu);
  if (layernorm && !rmsnorm && gelu.size() == 1 && silu.empty()) {
    s.architecture = Architecture::kGpt;
  } else if (rmsnorm && !layernorm && silu.size() == 1 && gelu.empty()) {
    s.architecture = Architecture::kLlama;
  } else {
    return missing(
        "no MLP of a known kind: GPT's layernorm and one gelu, or Llama's rmsnorm and one silu");
  }
  const Operation* activation = s.architecture == Architecture::kGpt ? gelu[0] : silu[0];
  const Type u = activation->operand(0)->type();
  if (u.rank() != 3) return missing("the MLP activation's input is not [batch, seq, ffn]");
  s.ffn = u.dims()[2];
  return s;
}

// The head's weight: a [hidden, vocabulary] argument that a matmul multiplies by.
absl::StatusOr<int64_t> ReadVocabulary(const Function& f, int64_t hidden, absl::string_view file) {
  const std::string at = Where(file, f.loc());
  if (!Unannotated(f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, "the head @", f.name(), " has a mesh or layouts (write it for one device)"));
  }
  for (Operation* op : OpsOf(f, OpKind::kMatmul)) {
    const Value* w = op->operand(1);
    // [hidden, vocabulary], or a table tied to the embedding's, [vocabulary, hidden]
    // multiplied transposed.
    const int in = op->BoolAttr("transpose_b") ? 1 : 0;
    if (w->defining_op() == nullptr && w->type().rank() == 2 && w->type().dims()[in] == hidden) {
      return w->type().dims()[1 - in];
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(at, "the head @", f.name(),
                                                 " has no output embedding: a [", hidden,
                                                 ", vocabulary] argument multiplied by matmul"));
}

}  // namespace

absl::StatusOr<ModelFromIr> ReadModelFromIr(const Module& module, absl::string_view file,
                                            absl::string_view name, int64_t global_batch) {
  // Every callee, and the calls of each function in order.
  absl::flat_hash_set<std::string> called;
  for (const Function* f : module.functions()) {
    for (Operation* call : OpsOf(*f, OpKind::kCall)) called.insert(Callee(*call));
  }
  std::vector<const Function*> tops;
  for (const Function* f : module.functions()) {
    if (!f->is_spmd() && !called.contains(f->name())) tops.push_back(f);
  }
  if (tops.size() != 1) {
    std::vector<std::string> names;
    for (const Function* f : tops) names.push_back(absl::StrCat("@", f->name()));
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": a model has one top function (a global function no other function calls); ",
        tops.empty() ? "there is none" : absl::StrCat("there are ", absl::StrJoin(names, ", "))));
  }
  const Function& top = *tops[0];
  const std::vector<Operation*> calls = OpsOf(top, OpKind::kCall);
  const std::string at_top = Where(file, top.loc());
  if (calls.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at_top, "the top function @", top.name(), " calls no layer"));
  }
  // The head is the last call's callee; the embedding the first call's when it takes
  // the top function's token ids (an integer [batch, seq] first argument); the layer the
  // most called of the others (the first in call order on a tie).
  const std::string& head_name = Callee(*calls.back());
  std::string embed_name;
  if (calls.size() > 1 && calls.front()->num_operands() > 0 &&
      calls.front()->operand(0) == top.body()->argument(0)) {
    const Type ids = top.arg_types()[0];
    if (ids.is_tensor() && ids.rank() == 2 && !IsFloatType(ids.element_type())) {
      embed_name = Callee(*calls.front());
    }
  }
  absl::flat_hash_map<std::string, int64_t> counts;
  std::string layer_name;
  for (const Operation* call : calls) {
    const std::string& callee = Callee(*call);
    if (callee == head_name || (callee == embed_name && call == calls.front())) continue;
    const int64_t n = ++counts[callee];
    if (layer_name.empty() || n > counts[layer_name]) layer_name = callee;
  }
  if (layer_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        at_top, "the top function @", top.name(), " calls only @", head_name,
        ": a model calls a transformer layer (the most called function) and a head last"));
  }
  // Nothing else may hide in the top function: the search costs layers x @layer and one
  // @head, so another callee or op would be silently left out of every number.
  for (Operation* op : *top.body()) {
    const std::string at = Where(file, op->loc());
    if (op->Is(OpKind::kReturn)) continue;
    if (!op->Is(OpKind::kCall)) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "the top function @", top.name(), " holds `", op->name(),
          "`: a model's top function holds only the calls of its layer and its head, and the "
          "return"));
    }
    const std::string& callee = Callee(*op);
    if (!embed_name.empty() && callee == embed_name && op == calls.front()) continue;
    if (callee != layer_name && callee != head_name) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "the top function @", top.name(), " calls @", callee, " besides the layer @",
          layer_name, " and the head @", head_name,
          ": a model has one layer function (the most called) and the head last"));
    }
    if (callee == head_name && op != calls.back()) {
      return absl::InvalidArgumentError(absl::StrCat(at, "the top function @", top.name(),
                                                     " calls the head @", head_name,
                                                     " before its last call"));
    }
  }
  const Function& layer = *module.FindFunction(layer_name);
  const Function& head = *module.FindFunction(head_name);
  absl::StatusOr<LayerSizes> sizes = ReadLayer(layer, file);
  if (!sizes.ok()) return sizes.status();
  absl::StatusOr<int64_t> vocabulary = ReadVocabulary(head, sizes->hidden, file);
  if (!vocabulary.ok()) return vocabulary.status();

  ModelFromIr out;
  ModelSpec& m = out.spec;
  m.name = std::string(name);
  m.architecture = sizes->architecture;
  m.layers = counts[layer_name];
  m.hidden = sizes->hidden;
  m.heads = sizes->heads;
  m.kv_heads = sizes->kv_heads;
  m.ffn = sizes->ffn;
  m.sequence = sizes->sequence;
  m.vocabulary = *vocabulary;
  m.global_batch = global_batch;
  m.dtype = sizes->dtype;
  m.attention = sizes->attention;
  if (absl::Status s = Validate(m); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(file, layer.loc()), s.message()));
  }
  out.micro_batch = sizes->micro_batch;
  if (global_batch % out.micro_batch != 0) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": the global batch ", global_batch,
                                                   " is not a multiple of the file's micro-batch ",
                                                   out.micro_batch));
  }
  // The functions must be ones the Megatron layout step lays out (the rules do not
  // depend on tp or cp): said now, at the file's own lines, not in the search.
  std::vector<std::pair<const Function*, int64_t>> laid_out = {{&layer, 0}, {&head, m.vocabulary}};
  // An embedding the file calls is laid out too (its costs are the generated one's, from
  // the sizes read here: embedding_program.h).
  if (!embed_name.empty()) laid_out.push_back({module.FindFunction(embed_name), m.vocabulary});
  for (const auto& [f, vocabulary] : laid_out) {
    MegatronLayoutOptions o;
    o.layout.micro_batch = out.micro_batch;
    o.vocabulary = vocabulary;
    o.file = std::string(file);
    if (absl::Status s = MegatronLayoutModule(*f, o).status(); !s.ok()) return s;
  }
  auto functions = std::make_shared<Module>();
  functions->AddFunction(layer.Clone());
  functions->AddFunction(head.Clone());
  out.functions = std::move(functions);
  out.layer_name = layer.name();
  out.head_name = head.name();
  return out;
}

}  // namespace commir::search::plan
