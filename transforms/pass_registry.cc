#include "transforms/pass_registry.h"

#include <algorithm>
#include <vector>

#include "commir/check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/autodiff/training_step.h"
#include "transforms/canonicalize.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/inline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/megatron_layout.h"
#include "transforms/sharding/propagate.h"

namespace commir {
namespace {

std::vector<PassInfo> BuildRegistry() {
  std::vector<PassInfo> passes = {
      {"autodiff",
       "Add @f_grad to each global function @f: its results and the gradients of its first "
       "(scalar) result, or a vector-Jacobian product",
       {{"func", PassOptionType::kString, "",
         "The function to differentiate, e.g. @mlp (empty: every global function)"},
        {"wrt", PassOptionType::kString, "",
         "Arguments to differentiate with respect to, e.g. \"w1,w2\" (empty: every float "
         "argument)"},
        {"seed", PassOptionType::kEnum, "loss",
         "loss: the gradient of the first result, a float scalar; cotangents: a VJP taking "
         "one cotangent argument per float result",
         {"loss", "cotangents"}},
        {"grad-type", PassOptionType::kEnum, "same",
         "Element type of every gradient: same (each value's own) or f32/f64 (e.g. bf16 "
         "forward, f32 gradients)",
         {"same", "f32", "f64"}},
        {"remat", PassOptionType::kEnum, "none",
         "Activation recomputation: none (keep every forward value the backward reads) or "
         "blocks (the backward recomputes each pre-norm residual block's inside)",
         {"none", "blocks"}},
        {"remat-at", PassOptionType::kString, "",
         "Checkpoint values instead of remat=blocks, e.g. \"%r1,%y\": the backward "
         "recomputes what lies between them"}},
       MakePass<AutodiffPass>},
      {"canonicalize",
       "Fold constants and simplify algebraic identities, to a fixed point",
       {{"fold-constants", PassOptionType::kBool, "true",
         "Fold elementwise and index ops whose operands are all constants into 'full'"},
        {"max-rewrites", PassOptionType::kInt, "-1",
         "Stop after this many rewrites (-1: no limit); bisects a bad rewrite", {}, -1}},
       MakePass<CanonicalizePass>},
      {"cse",
       "Merge equivalent ops into an identical op that dominates them",
       {},
       MakePass<CsePass>},
      {"dce",
       "Erase unused ops, dead loops and loop-carried values nothing reads",
       {},
       MakePass<DcePass>},
      {"inline",
       "Replace every call by a copy of its callee's body (the callees stay in the module)",
       {},
       MakePass<InlinePass>},
      {"propagate-sharding",
       "Complete the layout of every value of global functions from arguments, results and "
       "annotations",
       {{"iterations", PassOptionType::kInt, "1",
         "Backward/forward rounds (1 to 100); later rounds see the layouts chosen before", {},
         1, 100},
        {"explain", PassOptionType::kString, "",
         "Values (e.g. \"%q,%k\") whose op's strategy choice is explained on stderr: every "
         "candidate's layouts and costs, and why the chosen one won"}},
       MakePass<sharding::PropagateShardingPass>},
      {"lower-to-spmd",
       "Partition global functions into spmd functions with explicit collectives",
       {},
       MakePass<sharding::LowerToSpmdPass>},
      {"megatron-layout",
       "Lay out an unannotated pre-norm transformer as Megatron-LM does: tensor, sequence and "
       "context parallelism on a mesh @m(cp=C, tp=T)",
       {{"tp", PassOptionType::kInt, "1",
         "Tensor-parallel devices: attention heads and MLP columns split over the tp axis", {},
         1, sharding::kMaxMegatronParallelism},
        {"cp", PassOptionType::kInt, "1",
         "Context-parallel devices: the sequence split over the cp axis everywhere", {}, 1,
         sharding::kMaxMegatronParallelism},
        {"sp", PassOptionType::kBool, "false",
         "Sequence parallelism: the residual stream's sequence split over tp too (Megatron-LM's "
         "--sequence-parallel; nothing with tp=1)"}},
       MakePass<sharding::MegatronLayoutPass>},
      {"comm-report",
       "Print to stderr, per spmd function, the collectives by kind: count and bytes per device",
       {},
       MakePass<sharding::CommReportPass>},
      {"pipeline-collective-matmul",
       "Split all_gather+matmul and matmul+reduce_scatter pairs into chunks pipelined over "
       "streams",
       {{"chunks", PassOptionType::kInt, "4",
         "Chunks S per collective; must divide each device's block (1: leave unchanged)", {},
         1},
        {"streams", PassOptionType::kInt, "2",
         "Streams K; chunk i's slice, collective and GEMM run on stream i mod K", {}, 1}},
       MakePass<schedules::PipelineCollectiveMatmulPass>},
      {"ring-collective-matmul",
       "Replace all_gather+matmul and matmul+reduce_scatter pairs by a ring of shifts "
       "overlapping the block GEMMs",
       {{"direction", PassOptionType::kEnum, "uni",
         "uni: n-1 steps one way; bi: half-blocks both ways, n-1 steps of half the bytes "
         "(odd blocks: whole blocks both ways, ceil((n-1)/2) steps)",
         {"uni", "bi"}}},
       MakePass<schedules::RingCollectiveMatmulPass>},
      {"schedule-report",
       "Print to stderr, per spmd function, the steps executed, bytes sent and peak extra "
       "memory per device",
       {},
       MakePass<schedules::ScheduleReportPass>},
      {"ring-attention",
       "Replace all-gathered k/v of sequence-parallel attention by a ring of shifted blocks "
       "merged by online softmax",
       {{"zigzag", PassOptionType::kBool, "false",
         "Causal: hold chunks r and 2n-1-r so every step does equal work (permutes q, k, v "
         "and the output with all_to_all)"},
        {"axes", PassOptionType::kString, "",
         "Mesh axes of the k/v gather to ring over, e.g. sp or \"dp,sp\": the leading axes "
         "of the gather; the rest stay gathered in each step (empty: every axis)"}},
       MakePass<schedules::RingAttentionPass>},
      {"training-step",
       "Add @f_step to each global function @f: one SGD step returning the loss (@f's "
       "first result) and each trained param p - lr * dloss/dp",
       {{"func", PassOptionType::kString, "",
         "The function, e.g. @block (empty: every global function)"},
        {"params", PassOptionType::kString, "",
         "The trained arguments, e.g. \"w1,w2\" (required); their new values follow the "
         "loss in argument order"},
        {"lr", PassOptionType::kString, "0.05", "The learning rate"},
        {"grad-type", PassOptionType::kEnum, "same",
         "Element type of the gradients and the update: same (each param's own) or f32/f64 "
         "(an f32 update of bf16 params, rounded back)",
         {"same", "f32", "f64"}}},
       MakePass<TrainingStepPass>},
      {"ulysses-attention",
       "Replace all-gathered k/v of sequence-parallel attention by all_to_all to a head split "
       "and back",
       {{"axes", PassOptionType::kString, "",
         "Mesh axes of the k/v gather to all_to_all over, e.g. sp or \"dp,sp\": the trailing "
         "axes of the gather; the rest stay gathered (empty: every axis)"}},
       MakePass<schedules::UlyssesAttentionPass>},
  };
  std::sort(passes.begin(), passes.end(),
            [](const PassInfo& a, const PassInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < passes.size(); ++i) {
    COMMIR_CHECK(passes[i - 1].name != passes[i].name, "two passes share a name");
  }
  return passes;
}

}  // namespace

absl::Span<const PassInfo> RegisteredPasses() {
  static const std::vector<PassInfo>* passes = new std::vector<PassInfo>(BuildRegistry());
  return *passes;
}

const PassInfo* FindRegisteredPass(absl::string_view name) {
  for (const PassInfo& info : RegisteredPasses()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace commir
