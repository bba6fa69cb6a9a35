// The communication schedules a search composes on each partitioned program: an
// attention schedule, then a collective-matmul schedule, each possibly none. A schedule
// that rewrites nothing leaves the program as it was, so that composition is a
// duplicate and is merged (the search counts it).
#ifndef COMMIR_SEARCH_SCHEDULE_SPACE_H_
#define COMMIR_SEARCH_SCHEDULE_SPACE_H_

#include <string>
#include <vector>

#include "search/mesh_shapes.h"

namespace commir::search {

// Pass-pipeline texts for attention: "" (plain all-gathered k/v), the ring (contiguous
// and zigzag), Ulysses, and on meshes of two or more axes: the ring and Ulysses over each
// single axis (the rest of the sequence gather stays), and for each pair of axes (major,
// minor) USP's hybrid `ulysses-attention{axes=minor},ring-attention{axes=major}` and the
// double ring `ring-attention{axes=major},ring-attention{axes=minor}`.
std::vector<std::string> AttentionSchedules(const MeshShape& mesh);
// The same for a mesh whose axes have these names, major first (the plan search's layer
// programs name theirs cp and tp).
std::vector<std::string> AttentionSchedules(const std::vector<std::string>& axes);

// Pass-pipeline texts for the all_gather+matmul and matmul+reduce_scatter pairs: "",
// pipelined chunks x streams, and the uni- and bidirectional rings.
std::vector<std::string> MatmulSchedules();

// "a,b" without empty parts.
std::string JoinPipeline(const std::string& first, const std::string& second);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_SCHEDULE_SPACE_H_
