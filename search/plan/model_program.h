// The whole model written as CommIR (issue 15: "a model is CommIR: one function per
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
#include "search/plan/model_spec.h"

namespace commir::search::plan {

inline constexpr char kModelFunction[] = "model";

// The module's text in commir-opt's canonical form (verified). Errors when the spec is invalid or
// the micro-batch below 1.
absl::StatusOr<std::string> ModelProgram(const ModelSpec& model, int64_t micro_batch);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_PROGRAM_H_
