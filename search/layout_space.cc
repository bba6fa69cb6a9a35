#include "search/layout_space.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir::search {
namespace {

using ClassSet = std::vector<int>;

// Non-empty subsets of {0..n-1} of at most `k` classes, by size then lexicographic.
std::vector<ClassSet> ClassSets(int n, int k) {
  std::vector<ClassSet> sets;
  ClassSet current;
  std::function<void(int, int)> choose = [&](int start, int size) {
    if (static_cast<int>(current.size()) == size) {
      sets.push_back(current);
      return;
    }
    for (int c = start; c < n; ++c) {
      current.push_back(c);
      choose(c + 1, size);
      current.pop_back();
    }
  };
  for (int size = 1; size <= std::min(n, k); ++size) choose(0, size);
  return sets;
}

class Enumerator {
 public:
  Enumerator(const Function& function, const std::vector<DimClass>& classes, const MeshShape& mesh,
             int max_classes_per_axis, LayoutSpaceStats& stats)
      : function_(function), classes_(classes), mesh_(mesh), stats_(stats) {
    sets_ = ClassSets(static_cast<int>(classes.size()), max_classes_per_axis);
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
    for (size_t c = 0; c < classes.size(); ++c) {
      for (const SignatureDim& d : classes[c].signature_dims) {
        dim_class_[(d.is_result ? num_args_ : 0) + d.index][d.dim] = static_cast<int>(c);
      }
    }
    names_ = mesh.axis_names();
  }

  std::vector<LayoutCandidate> Run() {
    chosen_.clear();
    Extend();
    return std::move(out_);
  }

 private:
  // Whether giving axis `axis` the classes `set` keeps every tensor free of a repeated
  // axis (the axes chosen so far are distinct, so only `set` itself can repeat one).
  bool SplitsOneTensorTwice(const ClassSet& set) const {
    for (const std::vector<int>& dims : dim_class_) {
      int hits = 0;
      for (int c : dims) hits += std::find(set.begin(), set.end(), c) != set.end();
      if (hits > 1) return true;
    }
    return false;
  }

  void Extend() {
    size_t axis = chosen_.size();
    if (axis == mesh_.sizes.size()) {
      Emit();
      return;
    }
    for (size_t s = 0; s < sets_.size(); ++s) {
      ++stats_.assignments;
      const ClassSet& set = sets_[s];
      if (SplitsOneTensorTwice(set) || !Divisible(set, mesh_.sizes[axis])) {
        ++stats_.rejected;
        continue;
      }
      chosen_.push_back(s);
      Extend();
      chosen_.pop_back();
    }
  }

  // Whether each class of `set` still divides after also splitting over `size`.
  bool Divisible(const ClassSet& set, int64_t size) const {
    for (int c : set) {
      int64_t group = size;
      for (size_t a = 0; a < chosen_.size(); ++a) {
        const ClassSet& other = sets_[chosen_[a]];
        if (std::find(other.begin(), other.end(), c) != other.end()) group *= mesh_.sizes[a];
      }
      if (classes_[c].divisible_size % group != 0) return false;
    }
    return true;
  }

  // `type` laid out by `class_axes`. A dimension the input declares zigzag stays zigzag
  // when it is split (the data loader provides it so); `valid` turns false when its size
  // does not divide into 2n chunks.
  Type WithLayout(Type type, const std::vector<int>& dim_classes,
                  const std::vector<AxisList>& class_axes, bool& valid) const {
    if (!type.is_tensor()) return type;
    std::vector<AxisList> dims(type.rank());
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dim_classes[d] >= 0) dims[d] = class_axes[dim_classes[d]];
    }
    int64_t zigzag = type.zigzag_dim();
    Type laid_out = type.WithoutSharding().WithSharding(dims, {});
    if (zigzag < 0 || dims[zigzag].empty()) return laid_out;
    int64_t group = 1;
    for (const std::string& axis : dims[zigzag]) {
      for (size_t a = 0; a < names_.size(); ++a) {
        if (names_[a] == axis) group *= mesh_.sizes[a];
      }
    }
    if (type.dims()[zigzag] % (2 * group) != 0) valid = false;
    return laid_out.WithZigzag(zigzag);
  }

  void Emit() {
    std::vector<AxisList> class_axes(classes_.size());
    for (size_t a = 0; a < chosen_.size(); ++a) {
      for (int c : sets_[chosen_[a]]) class_axes[c].push_back(names_[a]);
    }
    for (size_t c = 0; c < classes_.size(); ++c) {
      if (classes_[c].pinned && class_axes[c].empty()) {
        ++stats_.rejected;
        return;
      }
    }
    LayoutCandidate candidate;
    candidate.mesh = mesh_;
    bool valid = true;
    for (int i = 0; i < num_args_; ++i) {
      candidate.arg_types.push_back(
          WithLayout(function_.arg_types()[i], dim_class_[i], class_axes, valid));
    }
    for (size_t r = 0; r < function_.result_types().size(); ++r) {
      candidate.result_types.push_back(
          WithLayout(function_.result_types()[r], dim_class_[num_args_ + r], class_axes, valid));
    }
    if (!valid) {
      ++stats_.rejected;
      return;
    }
    std::string key;
    for (Type t : candidate.arg_types) absl::StrAppend(&key, t.ToString(), ";");
    for (Type t : candidate.result_types) absl::StrAppend(&key, t.ToString(), ";");
    if (!seen_.insert(key).second) {
      ++stats_.duplicates;
      return;
    }
    std::vector<std::string> parts;
    for (size_t c = 0; c < classes_.size(); ++c) {
      const AxisList& axes = class_axes[c];
      if (axes.empty()) continue;
      parts.push_back(absl::StrCat(classes_[c].name, "@",
                                   axes.size() == 1 ? axes[0]
                                                    : absl::StrCat("(", absl::StrJoin(axes, ","), ")")));
    }
    candidate.description = parts.empty() ? "replicated" : absl::StrJoin(parts, " ");
    candidate.class_axes = std::move(class_axes);
    out_.push_back(std::move(candidate));
  }

  const Function& function_;
  const std::vector<DimClass>& classes_;
  const MeshShape& mesh_;
  LayoutSpaceStats& stats_;
  std::vector<ClassSet> sets_;
  int num_args_ = 0;
  std::vector<std::vector<int>> dim_class_;
  std::vector<std::string> names_;
  std::vector<size_t> chosen_;
  absl::flat_hash_set<std::string> seen_;
  std::vector<LayoutCandidate> out_;
};

}  // namespace

std::vector<LayoutCandidate> EnumerateLayouts(const Function& function,
                                              const std::vector<DimClass>& classes,
                                              const MeshShape& mesh, int max_classes_per_axis,
                                              LayoutSpaceStats& stats) {
  if (classes.empty()) return {};
  return Enumerator(function, classes, mesh, max_classes_per_axis, stats).Run();
}

}  // namespace commir::search
