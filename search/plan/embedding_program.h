// The input embedding of a model as CommIR for one micro-batch, like layer_program.h's
// layer and head: @embed(%ids, %wemb[, %wpos]) -> the residual stream [mb, seq, hidden].
// The token ids (i32 [mb, seq]) look up rows of the [vocabulary, hidden] table (`gather`);
// GPT adds its learned positions ([seq, hidden], broadcast over the micro-batch); Llama has
// none (its rotary embeddings act inside attention, and are not in the layer either).
//
// Laid out by megatron_layout.h as Megatron-LM's VocabParallelEmbedding (Shoeybi et al.
// 2019): the table's rows, padded to a multiple of 128 x tp as the head's columns, split
// over tp; the ids' sequence over cp; the output in the residual stream's layout (its
// sequence over tp too with sequence parallelism); the positions whole on every rank
// (each slices its own rows). The partitioner finds the rest from gather's rule (each
// rank looks up the ids in its rows, zeros elsewhere, and the partial rows are summed
// over tp: an all_reduce, or a reduce_scatter into the sequence-parallel stream), so the
// costs are whatever it produces.
#ifndef COMMIR_SEARCH_PLAN_EMBEDDING_PROGRAM_H_
#define COMMIR_SEARCH_PLAN_EMBEDDING_PROGRAM_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

inline constexpr char kEmbedFunction[] = "embed";

// The token ids' element type (Megatron-LM's int64 ids fit in i32 for any vocabulary the
// model spec allows: at most 2^22).
inline constexpr ElementType kTokenIdType = ElementType::kI32;

// The embedding on one device over the model's own (unpadded) vocabulary: what the model
// written as CommIR (model_program.h) calls.
absl::StatusOr<std::unique_ptr<Module>> SingleDeviceEmbedding(const ModelSpec& model,
                                                              int64_t micro_batch);

// The embedding laid out on the layout's cp x tp mesh (none when tp = cp = 1), with the
// table padded as PaddedVocabulary(vocabulary, tp): what layer_cost.h costs. Errors as
// TransformerLayerProgram's when the layout does not divide the sequence.
absl::StatusOr<std::unique_ptr<Module>> EmbeddingProgram(const ModelSpec& model,
                                                         const LayerLayout& layout);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_EMBEDDING_PROGRAM_H_
