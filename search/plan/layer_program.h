// The CommIR programs whose predicted times are the plan's layer costs (the costs
// come from real partitioned and scheduled CommIR programs): one transformer layer and
// the output head of a model, for one micro-batch, laid out Megatron-style on a mesh of
// the tensor-parallel and context-parallel groups.
//
// The layer and head are generated once, for one device (SingleDeviceLayer/Head, also
// what the model written as CommIR calls: model_program.h), and laid out Megatron-style
// by megatron_layout.h: the residual stream [micro_batch, seq, hidden] has its sequence
// split over cp and, with sequence parallelism, over tp too; inside the attention and
// MLP blocks the sequence is gathered over tp (cp keeps it split), heads, key/value
// heads and the FFN columns are split over tp, and the output projections
// reduce(-scatter) back to the residual layout. These layouts are written on the
// intermediate values so that propagate-sharding does not pick cheaper-looking but
// non-Megatron layouts (gathering weights). Key/value heads that tp does not divide stay
// whole (replicated; see below). The
// vocabulary is padded to a multiple of 128 x tp, as Megatron-LM's
// --make-vocab-size-divisible-by does.
//
// Not in the programs (documented approximations): bias adds of GPT's projections (an
// elementwise add each), dropout and rotary embeddings. The embedding lookup is a program
// of its own (embedding_program.h).
//
// Q, K and V come from one GEMM, as Megatron-LM's `linear_qkv` computes them: one weight
// [hidden, kv_heads x (heads/kv_heads + 2) x head_dim] whose columns are grouped per
// key/value head (the group's query heads, its key head, its value head), so that the
// column split over tp gives each rank whole groups (the same parameters as three
// projections). Its output is put heads-first once and split into q, k and v by static
// slices, which the attention and its gradient read in place (k, v, and q with one
// query head per group); grouped query heads are put heads-first by a copy, as
// Megatron-LM's reshape of its query is one. Autodiff joins the three cotangents with one
// concat (transforms/autodiff/slice_tiling.h). Where tp does not divide the key/value
// heads (Megatron-LM refuses it: its attention divides the query groups over tp), every
// rank computes the whole QKV GEMM and takes its query heads (extra GEMM work, no extra
// communication in the forward).
//
// The attention is the fused `attention` op (causal; FlashAttention's cost curves) or,
// with the model's attention=unfused, pre-FlashAttention Megatron-LM's: scale q, a
// batched GEMM for the [b, heads, s, s] scores, softmax, a batched GEMM with v. That
// variant leaves out the causal mask (the GEMMs and the softmax touch the whole s x s
// either way, as Megatron-LM's did, so its cost is the masked one's, but its values are
// bidirectional attention's) and the attention dropout (no random op: Megatron-LM's
// dropout reads the probabilities and writes them and a mask in the forward, and reads
// the mask in the backward, traffic this layer does not have). It needs cp = 1.
#ifndef COMMIR_SEARCH_PLAN_LAYER_PROGRAM_H_
#define COMMIR_SEARCH_PLAN_LAYER_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

struct LayerLayout {
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;  // split the residual stream's sequence over tp
  int64_t micro_batch = 1;

  int64_t devices() const { return tp * cp; }
};

// The name of the generated global function in each program.
inline constexpr char kLayerFunction[] = "layer";
inline constexpr char kHeadFunction[] = "head";

// The labels' element type (token ids: any vocabulary the model spec allows fits).
inline constexpr ElementType kLabelType = ElementType::kI32;

// A module with a mesh (none when tp = cp = 1) and @layer(x, weights...) -> x', built in
// memory (SingleDeviceLayer laid out by megatron_layout.h). Errors when tp does not
// divide the heads and FFN, or cp the sequence (or tp x cp with sequence parallelism).
absl::StatusOr<std::unique_ptr<Module>> TransformerLayerProgram(const ModelSpec& model,
                                                                const LayerLayout& layout);

// @head(x, norm scale[, norm bias], output weight, labels) -> the loss: the final norm,
// the logits over the (padded) vocabulary split over tp, and the mean over the tokens of
// cross_entropy with the integer labels [micro_batch, seq] (split over cp like the
// sequence). GPT's output weight is the embedding's table [vocabulary, hidden], used
// transposed, so that the model written as CommIR ties them; Llama's is [hidden,
// vocabulary]. The vocabulary-parallel loss is whatever the partitioner makes of
// cross_entropy over vocabulary-split logits.
absl::StatusOr<std::unique_ptr<Module>> HeadProgram(const ModelSpec& model,
                                                    const LayerLayout& layout);

// The single-device layer and head for one micro-batch: the same ops as the programs
// above with no mesh and no layouts, and the head over the model's own (unpadded)
// vocabulary. The whole model written as CommIR (model_program.h) calls these. Each is
// built in memory (OpBuilder) as a module holding the one function (@layer, @head).
absl::StatusOr<std::unique_ptr<Module>> SingleDeviceLayer(const ModelSpec& model,
                                                          int64_t micro_batch);
absl::StatusOr<std::unique_ptr<Module>> SingleDeviceHead(const ModelSpec& model,
                                                         int64_t micro_batch);

// The vocabulary padded as Megatron-LM does for this tp.
int64_t PaddedVocabulary(int64_t vocabulary, int64_t tp);

// The checks every program here makes: the micro-batch's bounds (CheckMicroBatch), and
// with them the layout's (CheckLayerLayout: tp divides the heads and FFN, the splits the
// sequence).
absl::Status CheckMicroBatch(const ModelSpec& model, int64_t micro_batch);
absl::Status CheckLayerLayout(const ModelSpec& model, const LayerLayout& layout);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_LAYER_PROGRAM_H_
