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
  // Same signature layouts as an earlier candidate. Always 0: every class appears in the
  // signature, so the signature layouts give back each class's axes (kept for reports).
  int64_t duplicates = 0;
};

// The candidates of `function` on `mesh`, one at a time, in a deterministic order: by the
// first axis's class set, then the second's, and so on (class sets ordered by size, then
// by class). It holds only the current assignment (one class set per axis, each at most
// `max_classes_per_axis` classes), never the space, so its memory does not grow with the
// number of layouts. `function` and `classes` must outlive it.
class LayoutEnumerator {
 public:
  LayoutEnumerator(const Function& function, const std::vector<DimClass>& classes,
                   const MeshShape& mesh, int max_classes_per_axis);
  // The next candidate; false when there are no more.
  bool Next(LayoutCandidate& out);
  // Skips the next candidate without building its types; false when there are no more.
  bool Skip();
  // Counts of what has been enumerated so far.
  const LayoutSpaceStats& stats() const { return stats_; }

 private:
  bool NextAssignment();
  bool AxisAccepts(int axis) const;
  bool NextSet(std::vector<int>& set) const;
  bool Accepted();
  void Build(LayoutCandidate& out) const;
  Type WithLayout(Type type, const std::vector<int>& dim_classes) const;

  const Function& function_;
  const std::vector<DimClass>& classes_;
  MeshShape mesh_;
  int max_set_size_ = 0;
  int num_args_ = 0;
  // Per signature tensor (arguments, then results), per dimension: its class or -1.
  std::vector<std::vector<int>> dim_class_;
  // Per class: the signature tensors it appears in.
  std::vector<std::vector<int>> class_tensors_;
  std::vector<std::string> names_;
  // The current assignment: one class set per axis, for axes 0..depth_.
  std::vector<std::vector<int>> sets_;
  int depth_ = 0;
  bool started_ = false;
  bool done_ = false;
  // Per class: the mesh axes (bit a: axis a) that split it in the current assignment.
  std::vector<uint32_t> class_mask_;
  LayoutSpaceStats stats_;
};

// Every candidate of `function` on `mesh` (LayoutEnumerator's order), adding to `stats`.
// Materializes the space: for tests and small spaces; the search enumerates lazily.
std::vector<LayoutCandidate> EnumerateLayouts(const Function& function,
                                              const std::vector<DimClass>& classes,
                                              const MeshShape& mesh, int max_classes_per_axis,
                                              LayoutSpaceStats& stats);

// How many candidates `function` has on `mesh`, counting no further than `limit` + 1
// (a space larger than `limit` returns `limit` + 1). Exactly what LayoutEnumerator
// yields, without building any of them.
int64_t CountLayouts(const Function& function, const std::vector<DimClass>& classes,
                     const MeshShape& mesh, int max_classes_per_axis, int64_t limit);

// The closed-form size of the assignment space before any rule: the class sets of one
// axis (sum over s = 1..min(classes, max_classes_per_axis) of C(classes, s)) to the power
// of the axis count. An upper bound on the candidates of a mesh of `axes` axes; as a
// double, since it overflows 64 bits (1000 classes on three axes: 5e24).
double AssignmentBound(int64_t classes, int max_classes_per_axis, int axes);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_LAYOUT_SPACE_H_
