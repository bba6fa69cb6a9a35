// A layer's communication schedule (layer_schedule.h's pass pipeline) as the Megatron-LM
// arguments that run it, so that what the plan search costs is what Megatron-LM runs, and
// a note for each part that Megatron-LM has no equivalent of.
//
// Context parallelism (cp > 1), --cp-comm-type as Megatron-LM's arguments.py declares it
// (p2p, a2a, allgather or a2a+p2p; TransformerEngine's attention runs it):
//  * no attention schedule (plain collectives: keys and values all-gathered over cp):
//    allgather;
//  * ring-attention over the cp group: p2p (TransformerEngine's ring splits the sequence
//    in 2 cp chunks for causal load balance, which is ring-attention{zigzag=true}; a ring
//    costed without it gets a note: Megatron-LM runs the balanced one);
//  * ulysses-attention over the cp group: a2a;
//  * Ulysses over the inner of two context axes inside a ring over the outer one: a2a+p2p
//    with --hierarchical-context-parallel-sizes INNER OUTER (arguments.py: required with
//    a2a+p2p, product = the context-parallel size; its help: the first size groups
//    adjacent GPUs, where the all-to-all runs);
//  * any other attention schedule (the double ring; a sequence split over the tp axis):
//    no equivalent, a note.
// Tensor parallelism: a collective-matmul schedule is TransformerEngine's userbuffers
// overlap, --tp-comm-overlap, which arguments.py accepts only with --sequence-parallel
// (and sequence parallelism only with tp > 1); ring-collective-matmul is its
// ring_exchange method, pipeline-collective-matmul{chunks=c} its pipeline method with
// num_splits = c (both set per GEMM in --tp-comm-overlap-cfg's YAML: the defaults mix
// ring_exchange, pipeline and bulk, so a note says which the plan costed); the
// bidirectional ring has no TransformerEngine method (a note). A schedule on the output
// head has no equivalent (Megatron-LM's output layer is not overlapped).
#ifndef COMMIR_SEARCH_PLAN_MEGATRON_SCHEDULE_ARGS_H_
#define COMMIR_SEARCH_PLAN_MEGATRON_SCHEDULE_ARGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transforms/pipeline.h"

namespace commir::search::plan {

struct ScheduleArgs {
  std::vector<std::string> args;   // flags and values, in order
  std::vector<std::string> notes;  // what Megatron-LM runs differently or cannot run
  // False when some note says Megatron-LM would run another schedule than the plan's (no
  // equivalent, or the load-balanced ring for an unbalanced one).
  bool runs_as_costed = true;
};

struct ScheduleMesh {
  int64_t tp = 1;
  bool sequence_parallel = false;
  // The context axes, outer first, with their sizes: {{"cp", 4}} for the plan layouts'
  // one cp axis (layer_program.h); two for a hierarchical context split.
  std::vector<std::pair<std::string, int64_t>> context_axes;
};

// The schedules as the plan costed them (the passes and their typed options; empty: plain
// collectives).
ScheduleArgs MegatronScheduleArgs(const Pipeline& layer_schedule, const Pipeline& head_schedule,
                                  const ScheduleMesh& mesh);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEGATRON_SCHEDULE_ARGS_H_
