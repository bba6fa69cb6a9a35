// Reads a model written as CommIR (model_program.h writes one): the top
// function (the global function no other function calls) calls a transformer layer
// function once per layer and a head function last. The sizes come from the IR:
// [micro_batch, seq, hidden] from the layer's first argument, heads, key/value heads and
// the head dimension from its attention's operands (the fused `attention` op, or
// attention=unfused's batched matmul of q and k^T, softmax and batched matmul with v:
// the spec's attention kind), the FFN width from the MLP activation's input, GPT
// (layernorm, gelu) or Llama (rmsnorm, silu) from its ops, the vocabulary from the head's
// weight, the dtype from the element type. The global batch is not in the IR: the
// caller gives it.
#ifndef COMMIR_SEARCH_PLAN_MODEL_READER_H_
#define COMMIR_SEARCH_PLAN_MODEL_READER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

struct ModelFromIr {
  ModelSpec spec;
  int64_t micro_batch = 0;  // the one the file is written for
  // A module holding copies (Function::Clone) of the file's layer and head, unannotated,
  // under their own names: each op keeps its source location, so that a layout error
  // found later (for a tp the search tries) is said at the file's line:col. Shared: the
  // search's threads and the cpu check only read it.
  std::shared_ptr<const Module> functions;
  std::string layer_name;
  std::string head_name;

  const Function& layer() const { return *functions->FindFunction(layer_name); }
  const Function& head() const { return *functions->FindFunction(head_name); }
};

// `file` names the module in errors ("FILE:LINE:COL: ..." at the function or op that
// lacks what the plan search needs). `name` becomes the spec's name.
absl::StatusOr<ModelFromIr> ReadModelFromIr(const Module& module, absl::string_view file,
                                            absl::string_view name, int64_t global_batch);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MODEL_READER_H_
