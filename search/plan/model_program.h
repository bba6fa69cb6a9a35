// The whole model written as CommIR ("a model is CommIR: one function per
// distinct layer and a top function that calls them, so a model of N identical layers is
// written once and called N times"), generated from a model description for one
// micro-batch: single-device functions (no mesh, no layouts; laying them out is the plan
// search's job) @layer and @head (layer_program.h's generator, so the text is the layer
// the plan search costs) and a top function
//
//   @model(%x, %l0_g1, %l0_wq, ..., %l1_g1, ..., %head_g, %head_wout) -> logits
//
// that calls @layer once per layer with that layer's weights and @head once. %x is the
// embedded input [micro_batch, seq, hidden] (no embedding lookup op; layer_cost.h).
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
// with that layer's own weights": `func @name(%x, %l{first}_w..., ..., [%head_w...])`
// calling `layer` for layers first .. first + count - 1 (outputs %x{i+1} for layer i), then
// `head` when given (output %logits), returning the last. Built in `module` (OpBuilder),
// on `layer`'s mesh, after the functions already there. The whole model's top function
// (ModelProgram: first 0, every layer, the head) and a pipeline chunk's (plan_check.h).
// Only the callees' names, arguments and result types are used (not their bodies).
absl::StatusOr<Function*> AddLayerChain(Module& module, absl::string_view name,
                                        const Function& layer, int64_t first_layer, int64_t count,
                                        const Function* head);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_PROGRAM_H_
