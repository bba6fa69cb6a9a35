// One whole-model training plan: how the GPUs split the model and the batch.
// The search (plan_search.h) enumerates these; megatron_args.h prints one for Megatron-LM.
#ifndef COMMIR_SEARCH_PLAN_PARALLEL_PLAN_H_
#define COMMIR_SEARCH_PLAN_PARALLEL_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "search/plan/memory_model.h"
#include "search/plan/model_spec.h"

namespace commir::search::plan {

struct ParallelPlan {
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  bool sequence_parallel = false;
  int64_t virtual_stages = 1;  // model chunks per pipeline rank (interleaved 1F1B)
  int64_t micro_batch = 1;     // sequences per micro-batch
  int zero_stage = 0;
  Recompute recompute = Recompute::kNone;
  // Per pipeline rank (pp entries), or empty: `recompute` on every rank. 1F1B's first
  // ranks hold the most micro-batches in flight, so they may need a heavier recomputation
  // than the last; the search picks the lightest that fits per rank. When set, it wins
  // over `recompute`.
  std::vector<Recompute> stage_recompute;
  // Uneven pipelines (v = 1): each rank's transformer layers (pp entries, rank 0 first),
  // or empty: an even share. The first rank also embeds and the last runs the head, and
  // 1F1B's rank s holds p - s micro-batches in flight, so the best split can be any
  // vector (e.g. 9,8,8,7). When set, it wins over first/last below.
  std::vector<int64_t> stage_layers;
  // The ends-only shorthand (Megatron-LM's --decoder-first/last-pipeline-num-layers): the
  // first and the last rank's layers, the rest split evenly over the other ranks; 0: an
  // even share. LayersPerStage expands it.
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;

  bool uneven() const {
    return !stage_layers.empty() || first_stage_layers != 0 || last_stage_layers != 0;
  }
  // Rank `stage`'s recomputation (stage_recompute's entry, or the uniform one).
  Recompute RecomputeOf(int64_t stage) const;
  // Whether ranks differ in recomputation.
  bool mixed_recompute() const;
  // The heaviest recomputation of any rank (full > selective > none).
  Recompute HeaviestRecompute() const;
  int64_t gpus() const { return tp * cp * pp * dp; }
};

// "none", "selective", "full".
absl::string_view RecomputeName(Recompute r);
absl::StatusOr<Recompute> ParseRecompute(absl::string_view text);

// Each rank's recomputation: "full,selective,none" (rank 0 first).
std::string DescribeStageRecompute(const ParallelPlan& plan);

// Sets one recomputation per rank; a list whose entries are all equal is stored as the
// uniform `recompute` (so a plan has one spelling).
void SetStageRecompute(ParallelPlan& plan, std::vector<Recompute> per_rank);

// Micro-batches per data-parallel replica and iteration: global batch / (micro-batch x dp).
int64_t Microbatches(const ModelSpec& model, const ParallelPlan& plan);

// The most GPUs a plan may use (tp x cp x pp x dp), and the plan search's bound on
// --gpus: far beyond any cluster, and small enough for every product of plan sizes.
inline constexpr int64_t kMaxPlanGpus = int64_t{1} << 24;

// Whether the plan can train the model: sizes at least 1, sequence parallelism only with
// tp > 1, the global batch a multiple of micro-batch x dp, the layers a multiple of
// pp x v (or, with uneven stages, pp > 1 and: stage_layers one positive count per rank
// summing to the layers, with v = 1 and not combined with first/last; or first/last with
// the rest a multiple of the other ranks, and with v > 1 a rank between the ends, the
// other ranks' count a multiple of v and each end at least v - 1 chunks of it: see
// ChunkLayers), interleaving only with
// pp > 1 and micro-batches a multiple of pp, tp dividing the heads and FFN, cp (x tp with
// sequence parallelism) the sequence, ZeRO 0..3, a per-rank recomputation with one entry
// per pipeline rank. The error says which rule fails.
absl::Status CheckPlan(const ModelSpec& model, const ParallelPlan& plan);

// Transformer layers on each pipeline rank (the plan must pass CheckPlan).
std::vector<int64_t> LayersPerStage(const ModelSpec& model, const ParallelPlan& plan);

// Transformer layers of each model chunk, pp x v of them in model order (chunk c on rank
// c % pp; the plan must pass CheckPlan). With v = 1 LayersPerStage. Interleaved with the
// ends-only shorthand, every chunk holds the middle ranks' layers / v except the first
// rank's first chunk and the last rank's last chunk, which hold what their rank's count
// leaves (Meta's Llama 3 405B pipeline: 126 layers, first=7 last=7, pp = 16, v = 8 gives
// chunks of one layer but for an embedding-only first chunk and a head-only last one).
std::vector<int64_t> ChunkLayers(const ModelSpec& model, const ParallelPlan& plan);

// "tp=4 cp=1 pp=2 (v=2) dp=8 sp mb=1 zero=1 recompute=selective", with " layers=9,8,8,7"
// for an explicit split (" first=N last=M" for the shorthand); ranks that differ:
// "recompute=full,selective" (rank 0 first).
std::string DescribePlan(const ParallelPlan& plan);

// The inverse of DescribePlan, for costing a given plan (`commir-search --plan-eval`):
// "tp=8,pp=8,dp=12,sp,mb=1,zero=1,recompute=selective" -- keys tp, cp, pp, v, dp, mb,
// zero, recompute (none|selective|full, or one per pipeline rank: recompute=full,none,none
// -- the words after it that name a recomputation extend the list), layers (one count per
// rank: layers=9,8,8,7 -- the bare counts after it extend the list), first, last, and the
// word sp; separated by commas or spaces, in any order; an omitted key keeps ParallelPlan's
// default, and "(v=N)" as DescribePlan writes it is taken too. Errors name the bad key or value;
// the plan's rules are CheckPlan's, not checked here.
absl::StatusOr<ParallelPlan> ParsePlan(absl::string_view text);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PARALLEL_PLAN_H_
