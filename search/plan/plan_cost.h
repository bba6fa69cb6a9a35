// The cost of one whole-model plan: the layer costs measured on CommIR
// programs (layer_cost.h) assembled into pipeline ranks, then the iteration time
// (pipeline_model.h), the memory of every rank (memory_model.h), throughput and model
// FLOPs utilisation. What the plan search (plan_search.h) ranks.
//
// Ranks hold layers / pp layers each, or the plan's uneven split; rank 0 adds the embedding lookup,
// the last rank the output head (and for GPT's tied embedding a copy of the table, as Megatron-LM
// keeps one on the last stage). Recomputation per rank (the plan's uniform one, or
// stage_recompute): selective re-runs each layer's attention in its backward, full re-runs each
// layer's forward (the head is never recomputed).
#ifndef COMMIR_SEARCH_PLAN_PLAN_COST_H_
#define COMMIR_SEARCH_PLAN_PLAN_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/plan/layer_cost.h"
#include "search/plan/memory_model.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/pipeline_model.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {

struct PlanCost {
  PipelineTime time;
  std::vector<StageCost> stages;    // per pipeline rank, per micro-batch
  std::vector<StageMemory> memory;  // per pipeline rank
  double peak_memory_bytes = 0;     // the most of any rank
  bool fits = true;                 // every rank within the HBM capacity
  double tokens_per_second = 0;
  double model_flops_utilization = 0;  // model FLOPs / (time x GPUs x bf16 peak)
  // The communication schedules the layers and the head were costed with (LayerCost's
  // schedule: empty for plain collectives).
  Pipeline layer_schedule;
  Pipeline head_schedule;
};

struct PlanCostOptions {
  double grad_bytes_per_param = 4;  // fp32 main gradients, Megatron-LM's default
  bool overlap_dp_comm = true;
  // Bytes each GPU keeps free besides the plan's tensors: < 0 the default of
  // memory_headroom.h (CUDA context, NCCL buffers, fragmentation), else this fixed amount
  // (`--memory-headroom`).
  double memory_headroom_bytes = -1;
};

// One pipeline rank of a plan costed alone, for any layer count and recomputation: what
// CostPlan assembles (it uses this), exposed so that the plan search can choose a split
// rank by rank without costing whole plans. The plan's split and recomputation are
// ignored; everything else (tp, cp, pp, dp, mb, v, ZeRO) is the plan's.
class RankCoster {
 public:
  // Errors when a layer program cannot be measured. With `plain_layers`, the layer's and
  // head's plain-collectives variants where they have one (LayerCost::plain; CostPlan
  // falls back to them when the scheduled layers do not fit).
  static absl::StatusOr<RankCoster> Create(const ModelSpec& model, const ParallelPlan& plan,
                                           LayerCostCache& layers,
                                           const PlanCostOptions& options = {},
                                           bool plain_layers = false);
  // Rank `stage` holding `n` layers with recomputation `r`, per micro-batch.
  StageCost Cost(int64_t stage, int64_t n, Recompute r) const;
  // Its memory (and whether it fits in the hardware's HBM).
  absl::StatusOr<StageMemory> Memory(int64_t stage, int64_t n, Recompute r) const;
  // Its exposed data-parallel time (pipeline_model.h's DataParallelExposed).
  absl::StatusOr<double> DataParallelTime(int64_t stage, int64_t n, Recompute r) const;
  // Forward + backward + recomputation per micro-batch: what the pipeline's steady state
  // and bubble sum (pipeline_model.h).
  double MicrobatchSeconds(int64_t stage, int64_t n, Recompute r) const;
  const PipelineConfig& pipeline() const { return pipeline_; }
  const LayerCost& layer() const { return layer_; }
  const LayerCost& head() const { return head_; }

 private:
  RankCoster() = default;
  StageFootprint Footprint(int64_t stage, int64_t n) const;
  ModelSpec model_;
  ParallelPlan plan_;
  PlanCostOptions options_;
  sim::HardwareSpec hardware_;
  int64_t gpus_per_node_ = 1;
  LayerCost layer_, head_, embedding_;
  PipelineConfig pipeline_;
};

// Errors when CheckPlan refuses the plan or a layer cannot be measured. The hardware
// and the GPUs per node are the layer cache's (its PredictOptions), so that the layers
// and the pipeline and data-parallel transfers are costed on one cluster.
absl::StatusOr<PlanCost> CostPlan(const ModelSpec& model, const ParallelPlan& plan,
                                  LayerCostCache& layers, const PlanCostOptions& options = {});

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PLAN_COST_H_
