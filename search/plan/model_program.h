// The whole model written as CommIR ("a model is CommIR: one function per
// distinct layer and a top function that calls them, so a model of N identical layers is
// written once and called N times"), generated from a model description for one
// micro-batch: single-device functions (no mesh, no layouts; laying them out is the plan
// search's job) @embed (embedding_program.h), @layer and @head (layer_program.h's
// generator, so the text is what the plan search costs) and a top function
//
//   @model(%ids, %embed_wemb[, %embed_wpos], %l0_g1, %l0_wq, ..., %head_g, ...,
//          [%head_wout,] %head_labels) -> the loss
//
// that looks up the token ids with @embed, calls @layer once per layer with that layer's
// weights and @head once: the final norm, the logits and the mean cross-entropy with the
// labels. GPT's head takes the embedding's table (tied, as GPT-2/3 and Megatron-LM's GPT:
// one argument passed to both); Llama's has its own output weight.
#ifndef COMMIR_SEARCH_PLAN_MODEL_PROGRAM_H_
#define COMMIR_SEARCH_PLAN_MODEL_PROGRAM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

inline constexpr char kModelFunction[] = "model";

// The module built in memory and printed once: commir-opt's canonical form (verified). Errors when the spec is invalid or
// the micro-batch below 1.
absl::StatusOr<std::string> ModelProgram(const ModelSpec& model, int64_t micro_batch);

// A chain of layers as one function, the one builder of "call the layer once per layer
// with that layer's own weights": `func @name(%x | %ids, [%embed_w...], %l{first}_w...,
// ..., [%head_w...])` calling `embed` first when given (its input the chain's: the token
// ids), then `layer` for layers first .. first + count - 1 (outputs %x{i+1} for layer i),
// then `head` when given (output %loss; its labels are its last argument, so the chain's
// last), returning the last. With `tied`, the head's arguments named as one of the
// embedding's weights (GPT's %wemb) are that weight's argument, not new ones. Built in
// `module` (OpBuilder), on `layer`'s mesh, after the functions already there. The whole
// model's top function (ModelProgram: first 0, every layer, the embedding and the head)
// and a pipeline chunk's (plan_check.h). Only the callees' names, arguments and result
// types are used (not their bodies).
absl::StatusOr<Function*> AddLayerChain(Module& module, absl::string_view name,
                                        const Function& layer, int64_t first_layer, int64_t count,
                                        const Function* head, const Function* embed = nullptr,
                                        bool tied = false);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_PROGRAM_H_
