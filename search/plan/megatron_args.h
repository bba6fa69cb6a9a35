// A plan written as Megatron-LM launch arguments (so that a plan runs on the
// training engine people already use). Flag names follow Megatron-LM's
// megatron/training/arguments.py: the parallel sizes, --sequence-parallel,
// --micro-batch-size/--global-batch-size, --num-layers-per-virtual-pipeline-stage,
// --decoder-first/last-pipeline-num-layers (a split whose middle ranks are equal) or
// --pipeline-model-parallel-layout (any other split, "Et*9|t*8|t*7|t*8L"),
// --recompute-granularity/--recompute-method/--recompute-num-layers,
// --use-distributed-optimizer with --overlap-grad-reduce/--overlap-param-gather, and
// the model's shape (GQA, SwiGLU, RMSNorm, rotary positions and untied embeddings for
// Llama).
//
// ZeRO stages map as Megatron-LM offers them: 0 plain data parallelism, 1 the
// distributed optimizer (--use-distributed-optimizer: optimizer state sharded, gradients
// and parameters whole, memory_model.h); 2 has no Megatron-LM equivalent (its distributed
// optimizer keeps the whole gradient buffer) and is refused, as the search no longer
// offers it; 3 is torch FSDP2 (--use-torch-fsdp2), which Megatron-LM does not support with
// pipeline parallelism, so pp > 1 is refused.
//
// The layers' communication schedule the plan was costed with becomes
// --cp-comm-type / --tp-comm-overlap (megatron_schedule_args.h), with a note for each
// part Megatron-LM has no equivalent of.
//
// Recomputation chosen per pipeline rank has no Megatron-LM flag (it takes one setting for
// every stage): the arguments use the heaviest rank's setting and a note names the
// per-rank choice.
#ifndef COMMIR_SEARCH_PLAN_MEGATRON_ARGS_H_
#define COMMIR_SEARCH_PLAN_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {

struct MegatronArgs {
  std::vector<std::string> args;   // "--tensor-model-parallel-size", "4", ... in order
  std::vector<std::string> notes;  // where Megatron-LM runs the plan differently
};

// Errors when CheckPlan refuses the plan or Megatron-LM cannot express it. The schedules
// are PlanCost's layer_schedule and head_schedule (empty for plain collectives).
absl::StatusOr<MegatronArgs> ToMegatronArgs(const ModelSpec& model, const ParallelPlan& plan,
                                            const Pipeline& layer_schedule = {},
                                            const Pipeline& head_schedule = {});

// One flag (with its value) per line, joined by " \\\n", for a launch script.
std::string FormatMegatronArgs(const MegatronArgs& args);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEGATRON_ARGS_H_
