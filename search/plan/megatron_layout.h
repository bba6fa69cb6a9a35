// The Megatron-LM layout of a single-device transformer layer or output head (so that
// the plan's costs come from the model file's own functions): writes the tp/cp/sp
// sharding annotations on an unannotated function, the ones layer_program.h's programs
// carry, so that propagate-sharding partitions it as Megatron-LM does.
//
// The rules, by where a value comes from:
//  * the residual stream (the first argument, a row-parallel projection's output, and
//    elementwise ops of those): sequence over cp, and over tp with sequence parallelism;
//  * a norm's output: the sequence over cp only (gathered over tp inside the block);
//  * a column-parallel projection (a matmul of a norm's output by an argument weight):
//    the weight's and the output's columns over tp; when the output is reshaped into
//    heads that tp does not divide (key/value heads under grouped-query attention with
//    tp > kv heads), they stay whole;
//  * a reshape into or out of heads carries the columns' split to the heads and back;
//  * a row-parallel projection (a matmul of tp-split columns by an argument weight): the
//    weight's rows over tp, its output back in the residual stream's layout;
//  * the head's vocabulary (`vocabulary` > 0): padded to a multiple of 128 x tp, as
//    Megatron-LM's --make-vocab-size-divisible-by does, and split over tp.
// Written on the ops whose layout is not implied by their operands (norms, matmuls,
// reshapes, softmax) and on the signature; the rest is left to the parser, exactly as
// layer_program.h writes its programs. An op outside these rules is an error naming it.
#ifndef COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_
#define COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "search/plan/layer_program.h"

namespace commir::search::plan {

struct MegatronLayoutOptions {
  LayerLayout layout;      // its micro_batch must be the function's
  int64_t vocabulary = 0;  // the head's: pad and split columns of this width
  std::string name = "";   // the laid-out function's name; empty: the function's own
  // The padded width; 0: Megatron-LM's for the layout's tp. The cpu check lays out its
  // one-device reference with the plan's padding (plan_check.h).
  int64_t padded_vocabulary = 0;
  // Where the function was written: errors are "FILE:LINE:COL: @name: ...", and
  // MegatronLayoutText parses under this name.
  std::string file = "function.commir";
};

// The laid-out module's text: the mesh (none when tp = cp = 1) and `function` annotated.
// `function` must be global and unannotated, written for the layout's micro-batch.
absl::StatusOr<std::string> MegatronLayout(const Function& function,
                                           const MegatronLayoutOptions& options);

// The same from a module's text holding one function (e.g. its canonical print).
absl::StatusOr<std::string> MegatronLayoutText(const std::string& function_text,
                                               const MegatronLayoutOptions& options);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_
