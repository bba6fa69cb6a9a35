// The layouts a search tries on one mesh: each mesh axis splits a set of the program's
// dimension classes (dim_classes.h), and the layouts of the function's arguments and
// results follow from which axes split which class. propagate-sharding then chooses
// every intermediate layout, as it does for a program written by hand.
//
// An axis may split several classes at once (Megatron's tensor-parallel axis splits the
// heads, the FFN and, with sequence parallelism, the sequence of the residual stream),
// up to `max_classes_per_axis`. Assignments are dropped when:
//  - an axis splits nothing (its devices would only repeat each other's work);
//  - one argument or result would be split over the same axis twice;
//  - a class's size is not divisible by its axes' combined size;
//  - a class the input program splits (pinned) is left whole;
//  - a dimension the input declares zigzag (`4096@sp zigzag`, kept zigzag whenever it is
//    split, as the data loader provides it) does not divide into 2n chunks.
// Two axes may split the same classes (a sequence over (a, b)): the layout is the one a
// single axis of their size gives, but the schedules can then treat the axes apart (USP:
// Ulysses over b inside a ring over a). Assignments that give the same argument and result
// layouts are one candidate (they differ only in classes that appear nowhere in the
// signature).
#ifndef COMMIR_SEARCH_LAYOUT_SPACE_H_
#define COMMIR_SEARCH_LAYOUT_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "commir/ir.h"
#include "search/dim_classes.h"
#include "search/mesh_shapes.h"

namespace commir::search {

struct LayoutCandidate {
  MeshShape mesh;
  // Per class (in FindDimClasses order): the axes that split it, in mesh order.
  std::vector<AxisList> class_axes;
  std::vector<Type> arg_types;     // global types with this candidate's layouts
  std::vector<Type> result_types;  // requested result layouts
  // "x.0@a wq.1@b": each split class by name; "replicated" when none is.
  std::string description;
};

struct LayoutSpaceStats {
  int64_t assignments = 0;  // axis -> class-set assignments considered
  int64_t rejected = 0;     // dropped by the rules above
  int64_t duplicates = 0;   // same signature layouts as an earlier candidate
};

// The candidates of `function` on `mesh`, in a deterministic order: by the first axis's
// class set, then the second's, and so on (class sets ordered by size, then by class).
std::vector<LayoutCandidate> EnumerateLayouts(const Function& function,
                                              const std::vector<DimClass>& classes,
                                              const MeshShape& mesh, int max_classes_per_axis,
                                              LayoutSpaceStats& stats);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_LAYOUT_SPACE_H_
