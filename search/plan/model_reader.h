// Reads a model written as CommIR (model_program.h writes one): the top
// function (the global function no other function calls) calls a transformer layer
// function once per layer and a head function last. The sizes come from the IR:
// [micro_batch, seq, hidden] from the layer's first argument, heads, key/value heads and
// the head dimension from its attention's operands, the FFN width from the MLP
// activation's input, GPT (layernorm, gelu) or Llama (rmsnorm, silu) from its ops, the
// vocabulary from the head's weight, the dtype from the element type. The global batch
// is not in the IR: the caller gives it.
#ifndef COMMIR_SEARCH_PLAN_MODEL_READER_H_
#define COMMIR_SEARCH_PLAN_MODEL_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

struct ModelFromIr {
  ModelSpec spec;
  int64_t micro_batch = 0;  // the one the file is written for
  // The layer's and head's functions, unannotated: as written in the source (behind
  // blank lines, so that they parse at the file's own line:col), or their canonical
  // print when no source is given.
  std::string layer_function;
  std::string head_function;
};

// `file` names the module in errors ("FILE:LINE:COL: ..." at the function or op that
// lacks what the plan search needs). `name` becomes the spec's name. `source` is the
// text `module` was parsed from (optional: see ModelFromIr).
absl::StatusOr<ModelFromIr> ReadModelFromIr(const Module& module, absl::string_view file,
                                            absl::string_view name, int64_t global_batch,
                                            absl::string_view source = {});

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_READER_H_
