// The communication schedules a search composes on each partitioned program: an
// attention schedule, then a collective-matmul schedule or (where the program exchanges
// an expert buffer over ep) a MoE pipeline, each possibly none. A schedule
// that rewrites nothing leaves the program as it was, so that composition is a
// duplicate and is merged (the search counts it).
#ifndef COMMIR_SEARCH_SCHEDULE_SPACE_H_
#define COMMIR_SEARCH_SCHEDULE_SPACE_H_

#include <string>
#include <vector>

#include "search/mesh_shapes.h"
#include "transforms/pipeline.h"

namespace commir::search {

// Typed pipelines (their ToString is the recipe text); the empty pipeline is "no
// schedule". Attention: "" (plain all-gathered k/v), the ring (contiguous
// and zigzag), Ulysses, and on meshes of two or more axes: the ring and Ulysses over each
// single axis (the rest of the sequence gather stays), and for each pair of axes (major,
// minor) USP's hybrid `ulysses-attention{axes=minor},ring-attention{axes=major}` and the
// double ring `ring-attention{axes=major},ring-attention{axes=minor}`.
std::vector<Pipeline> AttentionSchedules(const MeshShape& mesh);
// The same for a mesh whose axes have these names, major first (the plan search's layer
// programs name theirs cp and tp).
std::vector<Pipeline> AttentionSchedules(const std::vector<std::string>& axes);

// Pipelines for the all_gather+matmul and matmul+reduce_scatter pairs: none, pipelined
// chunks x streams, and the uni- and bidirectional rings.
std::vector<Pipeline> MatmulSchedules();

// Pipelines for an expert-parallel MoE layer (a dispatch all_to_all over ep):
// moe-pipeline with 2, 4 and 8 chunks of the capacity (none is MatmulSchedules' empty
// pipeline). A chunk count that does not divide a layer's capacity fails and is counted
// as not applicable.
std::vector<Pipeline> MoeSchedules();

}  // namespace commir::search

#endif  // COMMIR_SEARCH_SCHEDULE_SPACE_H_
