// The order in which each pipeline rank runs its forward and backward passes in one
// training iteration: 1F1B (PipeDream-Flush, Megatron-LM's default) and, with v model
// chunks per rank, Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21), as in
// megatron/core/pipeline_parallel/schedules.py. plan_check.h executes these orders on
// the cpu mesh.
#ifndef COMMIR_SEARCH_PLAN_PIPELINE_SCHEDULE_H_
#define COMMIR_SEARCH_PLAN_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace commir::search::plan {

struct PipelineStep {
  bool forward = true;
  int64_t chunk = 0;       // model chunk in model order, 0 .. pp x v - 1 (rank = chunk % pp)
  int64_t microbatch = 0;  // 0 .. microbatches - 1
};

// Rank `rank`'s steps: warm-up forwards, then one forward and one backward alternately
// (steady state), then the remaining backwards (cool-down). With v = 1 the warm-up is
// pp - rank - 1 forwards; with v > 1 it is (pp - rank - 1) x 2 + (v - 1) x pp (every
// step when the micro-batches equal pp), micro-batches taken pp at a time per chunk,
// chunks in forward order for forwards and reverse order for backwards; v > 1 needs
// microbatches to be a multiple of pp. Chunk c of the model lives on rank c % pp.
std::vector<PipelineStep> OneFOneBSchedule(int64_t pp, int64_t v, int64_t microbatches,
                                           int64_t rank);

// The warm-up forwards of rank `rank` in OneFOneBSchedule (Megatron-LM's count; with
// v > 1 every step when microbatches == pp).
int64_t WarmupForwards(int64_t pp, int64_t v, int64_t microbatches, int64_t rank);

// The most model chunks' activations rank `rank` holds at once in OneFOneBSchedule
// (forwards run minus backwards run): the warm-up plus the steady state's first forward,
// or every step when the warm-up takes them all. memory_model.h counts with it.
int64_t PeakChunksInFlight(int64_t pp, int64_t v, int64_t microbatches, int64_t rank);

// GPipe's order: every forward of the rank's chunks (in model order, micro-batches in
// order), then every backward (chunks in reverse). Numerically the same step as 1F1B up
// to rounding; plan_check runs it to show that the order does not matter.
std::vector<PipelineStep> AllForwardAllBackwardSchedule(int64_t pp, int64_t v, int64_t microbatches,
                                                        int64_t rank);

// "F0 F1 B0 ..." with the chunk after a dot when v > 1 ("F3.1").
std::string DescribeSchedule(const std::vector<PipelineStep>& steps, int64_t v);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PIPELINE_SCHEDULE_H_
