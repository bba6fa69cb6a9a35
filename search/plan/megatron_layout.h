// The Megatron-LM layout of a single-device transformer layer or output head for the plan
// search (so that the plan's costs come from the model file's own functions): the
// `megatron-layout` pass's rules (transforms/sharding/megatron_layout.h) applied to a copy
// of the function in a module of its own, with the plan's micro-batch checked, the head's
// vocabulary padded as Megatron-LM pads it, and errors as "FILE:LINE:COL: @name: the
// Megatron layout: ..." (the planner reports them on its own).
#ifndef COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_
#define COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_

#include <cstdint>
#include <memory>
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
  // Where the function was written: errors are "FILE:LINE:COL: @name: ..." (a clone of
  // a parsed function keeps its positions). Empty (a function built in memory, at no
  // file's position): "@name: ...".
  std::string file;
};

// A module holding the mesh (none when tp = cp = 1) and a laid-out copy of `function`,
// which must be global and unannotated, written for the layout's micro-batch.
absl::StatusOr<std::unique_ptr<Module>> MegatronLayoutModule(const Function& function,
                                                             const MegatronLayoutOptions& options);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEGATRON_LAYOUT_H_
