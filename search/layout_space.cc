#include "search/layout_space.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir::search {

LayoutEnumerator::LayoutEnumerator(const Function& function, const std::vector<DimClass>& classes,
                                   const MeshShape& mesh, int max_classes_per_axis)
    : function_(function), classes_(classes), mesh_(mesh) {
  max_set_size_ = std::min(static_cast<int>(classes.size()), std::max(0, max_classes_per_axis));
  num_args_ = static_cast<int>(function.arg_types().size());
  int tensors = num_args_ + static_cast<int>(function.result_types().size());
  dim_class_.assign(tensors, {});
  for (int i = 0; i < num_args_; ++i) {
    Type t = function.arg_types()[i];
    dim_class_[i].assign(t.is_tensor() ? t.rank() : 0, -1);
  }
  for (size_t r = 0; r < function.result_types().size(); ++r) {
    Type t = function.result_types()[r];
    dim_class_[num_args_ + r].assign(t.is_tensor() ? t.rank() : 0, -1);
  }
  class_tensors_.assign(classes.size(), {});
  for (size_t c = 0; c < classes.size(); ++c) {
    for (const SignatureDim& d : classes[c].signature_dims) {
      int tensor = (d.is_result ? num_args_ : 0) + d.index;
      dim_class_[tensor][d.dim] = static_cast<int>(c);
      // Once per dimension: a class on two dimensions of one tensor cannot be split at all.
      class_tensors_[c].push_back(tensor);
    }
  }
  names_ = mesh.axis_names();
  sets_.assign(mesh.sizes.size(), {});
  class_mask_.assign(classes.size(), 0);
}

// The class set after `set` (empty: the first): by size, then lexicographic.
bool LayoutEnumerator::NextSet(std::vector<int>& set) const {
  const int n = static_cast<int>(classes_.size());
  const int size = static_cast<int>(set.size());
  for (int i = size - 1; i >= 0; --i) {
    if (set[i] < n - size + i) {
      ++set[i];
      for (int j = i + 1; j < size; ++j) set[j] = set[j - 1] + 1;
      return true;
    }
  }
  if (size + 1 > max_set_size_) return false;
  set.resize(size + 1);
  for (int j = 0; j <= size; ++j) set[j] = j;
  return true;
}

// Whether axis `axis` may split its set given the axes before it: no tensor gets the
// axis twice, and each class still divides after also splitting over this axis.
bool LayoutEnumerator::AxisAccepts(int axis) const {
  const std::vector<int>& set = sets_[axis];
  std::vector<int> tensors;
  for (int c : set) tensors.insert(tensors.end(), class_tensors_[c].begin(), class_tensors_[c].end());
  std::sort(tensors.begin(), tensors.end());
  if (std::adjacent_find(tensors.begin(), tensors.end()) != tensors.end()) return false;
  for (int c : set) {
    int64_t group = mesh_.sizes[axis];
    for (int a = 0; a < axis; ++a) {
      const std::vector<int>& other = sets_[a];
      if (std::find(other.begin(), other.end(), c) != other.end()) group *= mesh_.sizes[a];
    }
    if (classes_[c].divisible_size % group != 0) return false;
  }
  return true;
}

// The next assignment of a class set to every axis that passes AxisAccepts on each.
bool LayoutEnumerator::NextAssignment() {
  const int axes = static_cast<int>(sets_.size());
  if (done_ || axes == 0) return false;
  if (!started_) {
    started_ = true;
    depth_ = 0;
  }
  while (depth_ >= 0) {
    if (!NextSet(sets_[depth_])) {
      sets_[depth_].clear();
      --depth_;
      continue;
    }
    ++stats_.assignments;
    if (!AxisAccepts(depth_)) {
      ++stats_.rejected;
      continue;
    }
    if (depth_ + 1 == axes) return true;
    ++depth_;
  }
  done_ = true;
  return false;
}

// The rules on a whole assignment: every pinned class split, and every split zigzag
// dimension divisible into 2n chunks. Fills class_mask_.
bool LayoutEnumerator::Accepted() {
  std::fill(class_mask_.begin(), class_mask_.end(), 0);
  for (size_t a = 0; a < sets_.size(); ++a) {
    for (int c : sets_[a]) class_mask_[c] |= uint32_t{1} << a;
  }
  for (size_t c = 0; c < classes_.size(); ++c) {
    if (classes_[c].pinned && class_mask_[c] == 0) return false;
  }
  auto check = [&](Type type, const std::vector<int>& dim_classes) {
    if (!type.is_tensor()) return true;
    int64_t zigzag = type.zigzag_dim();
    if (zigzag < 0 || dim_classes[zigzag] < 0) return true;
    uint32_t mask = class_mask_[dim_classes[zigzag]];
    if (mask == 0) return true;
    int64_t group = 1;
    for (size_t a = 0; a < mesh_.sizes.size(); ++a) {
      if (mask & (uint32_t{1} << a)) group *= mesh_.sizes[a];
    }
    return type.dims()[zigzag] % (2 * group) == 0;
  };
  for (int i = 0; i < num_args_; ++i) {
    if (!check(function_.arg_types()[i], dim_class_[i])) return false;
  }
  for (size_t r = 0; r < function_.result_types().size(); ++r) {
    if (!check(function_.result_types()[r], dim_class_[num_args_ + r])) return false;
  }
  return true;
}

bool LayoutEnumerator::Skip() {
  while (NextAssignment()) {
    if (Accepted()) return true;
    ++stats_.rejected;
  }
  return false;
}

bool LayoutEnumerator::Next(LayoutCandidate& out) {
  if (!Skip()) return false;
  Build(out);
  return true;
}

// `type` laid out by the current assignment. A dimension the input declares zigzag stays
// zigzag when it is split (the data loader provides it so; Accepted checked its size).
Type LayoutEnumerator::WithLayout(Type type, const std::vector<int>& dim_classes) const {
  if (!type.is_tensor()) return type;
  std::vector<AxisList> dims(type.rank());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dim_classes[d] < 0) continue;
    for (size_t a = 0; a < names_.size(); ++a) {
      if (class_mask_[dim_classes[d]] & (uint32_t{1} << a)) dims[d].push_back(names_[a]);
    }
  }
  int64_t zigzag = type.zigzag_dim();
  Type laid_out = type.WithoutSharding().WithSharding(dims, {});
  if (zigzag < 0 || dims[zigzag].empty()) return laid_out;
  return laid_out.WithZigzag(zigzag);
}

void LayoutEnumerator::Build(LayoutCandidate& out) const {
  out = LayoutCandidate();
  out.mesh = mesh_;
  out.class_axes.assign(classes_.size(), {});
  for (size_t c = 0; c < classes_.size(); ++c) {
    for (size_t a = 0; a < names_.size(); ++a) {
      if (class_mask_[c] & (uint32_t{1} << a)) out.class_axes[c].push_back(names_[a]);
    }
  }
  for (int i = 0; i < num_args_; ++i) {
    out.arg_types.push_back(WithLayout(function_.arg_types()[i], dim_class_[i]));
  }
  for (size_t r = 0; r < function_.result_types().size(); ++r) {
    out.result_types.push_back(WithLayout(function_.result_types()[r], dim_class_[num_args_ + r]));
  }
  std::vector<std::string> parts;
  for (size_t c = 0; c < classes_.size(); ++c) {
    const AxisList& axes = out.class_axes[c];
    if (axes.empty()) continue;
    parts.push_back(absl::StrCat(classes_[c].name, "@",
                                 axes.size() == 1 ? axes[0]
                                                  : absl::StrCat("(", absl::StrJoin(axes, ","), ")")));
  }
  out.description = parts.empty() ? "replicated" : absl::StrJoin(parts, " ");
}

std::vector<LayoutCandidate> EnumerateLayouts(const Function& function,
                                              const std::vector<DimClass>& classes,
                                              const MeshShape& mesh, int max_classes_per_axis,
                                              LayoutSpaceStats& stats) {
  std::vector<LayoutCandidate> out;
  if (classes.empty()) return out;
  LayoutEnumerator enumerator(function, classes, mesh, max_classes_per_axis);
  LayoutCandidate candidate;
  while (enumerator.Next(candidate)) out.push_back(std::move(candidate));
  stats.assignments += enumerator.stats().assignments;
  stats.rejected += enumerator.stats().rejected;
  stats.duplicates += enumerator.stats().duplicates;
  return out;
}

int64_t CountLayouts(const Function& function, const std::vector<DimClass>& classes,
                     const MeshShape& mesh, int max_classes_per_axis, int64_t limit) {
  if (classes.empty()) return 0;
  LayoutEnumerator enumerator(function, classes, mesh, max_classes_per_axis);
  int64_t count = 0;
  while (count <= limit && enumerator.Skip()) ++count;
  return count;
}

double AssignmentBound(int64_t classes, int max_classes_per_axis, int axes) {
  double sets = 0, choose = 1;  // C(classes, s)
  for (int64_t s = 1; s <= std::min<int64_t>(classes, max_classes_per_axis); ++s) {
    choose = choose * static_cast<double>(classes - s + 1) / static_cast<double>(s);
    sets += choose;
  }
  return std::pow(sets, axes);
}

}  // namespace commir::search
