// A whole-model description for the plan search: the sizes of a decoder-only
// transformer and its training batch, with presets for published models and a small
// text form ("llama3-8b", "llama3-8b,seq=4096,global_batch=512" or every field spelled
// out). The layer programs (layer_program.h) are generated from it.
#ifndef COMMIR_SEARCH_PLAN_MODEL_SPEC_H_
#define COMMIR_SEARCH_PLAN_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/element_type.h"

namespace commir::search::plan {

// GPT: LayerNorm with bias, GELU MLP of two matrices, biases on every projection,
// learned positions, input and output embeddings tied. Llama: RMSNorm, SwiGLU MLP of
// three matrices, no biases, rotary positions (no weights), untied output embedding.
enum class Architecture { kGpt, kLlama };

// How the layer computes its self-attention. kFlash: one fused `attention` op
// (FlashAttention: the s x s scores stay on chip). kUnfused: as Megatron-LM ran before
// FlashAttention (Narayanan et al. 2021, Korthikanti et al. 2022): the scores
// q k^T / sqrt(d) written by a batched GEMM, a softmax kernel reading and writing them,
// and a batched GEMM of the probabilities with v, all as separate ops the sim prices
// (the s x s tensors at HBM bandwidth) and autodiff differentiates.
enum class AttentionKind { kFlash, kUnfused };

struct ModelSpec {
  std::string name;
  Architecture architecture = Architecture::kLlama;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // == heads: multi-head attention; fewer: grouped-query
  int64_t ffn = 0;       // the MLP's inner width
  int64_t sequence = 0;
  int64_t vocabulary = 0;
  int64_t global_batch = 0;  // sequences per iteration
  ElementType dtype = ElementType::kBF16;
  AttentionKind attention = AttentionKind::kFlash;

  int64_t head_dim() const { return hidden / heads; }
};

// Parameters of one transformer layer, of the embeddings (input, positions and the
// untied output) and of the whole model.
int64_t LayerParameters(const ModelSpec& model);
int64_t EmbeddingParameters(const ModelSpec& model);
int64_t TotalParameters(const ModelSpec& model);

// Model FLOPs of one iteration's forward and backward (no recomputation), the MFU
// numerator: 6 x parameters' matmul FLOPs per token plus the attention scores (causal
// attention's FLOPs counted in full, as Megatron-LM's papers do).
double ModelFlopsPerIteration(const ModelSpec& model);

// The preset names: gpt3-1.3b, gpt3-13b, gpt3-175b, llama3-8b, llama3-70b, llama3-405b.
std::vector<std::string> PresetNames();
absl::StatusOr<ModelSpec> Preset(absl::string_view name);

// "PRESET[,key=value...]" or "key=value,..." with keys name, arch (gpt|llama), layers,
// hidden, heads, kv_heads, ffn, seq, vocab, global_batch, dtype (bf16|f16|f32),
// attention (flash, the default, or unfused: AttentionKind). Errors
// name the bad key or value (a key given twice is one); the result is validated
// (Validate). kv_heads left out is heads (multi-head attention) without a preset or with
// a multi-head one (GPT-3's), and a grouped-query preset's own (Llama 3's 8; a refusal of
// it says that it is the preset's default).
absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view text);

// The largest value each size may take (kMaxLayers and so on), about eight times the
// largest published model's, so that every product the search forms (parameters, bytes
// of a layer's activations times the layers of a stage) stays far inside int64 and
// the search's work, linear in the layers, stays short.
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxHidden = int64_t{1} << 17;
inline constexpr int64_t kMaxHeads = int64_t{1} << 14;
inline constexpr int64_t kMaxFfn = int64_t{1} << 19;
inline constexpr int64_t kMaxSequence = int64_t{1} << 20;
inline constexpr int64_t kMaxVocabulary = int64_t{1} << 22;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 20;
// Tokens of one iteration (global_batch x seq).
inline constexpr int64_t kMaxTokensPerIteration = int64_t{1} << 32;

// Sizes positive and within their bounds above, heads dividing hidden, kv_heads dividing
// heads, a float dtype; unfused attention with multi-head attention only (the
// pre-FlashAttention Megatron-LM it models had no grouped-query attention).
absl::Status Validate(const ModelSpec& model);

// The spec in ParseModelSpec's form (every key; `attention` only when unfused, so that
// the default's text is what it was before the key existed).
std::string FormatModelSpec(const ModelSpec& model);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_SPEC_H_
