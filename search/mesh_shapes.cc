#include "search/mesh_shapes.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir::search {

std::vector<std::string> MeshShape::axis_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < sizes.size(); ++i) names.push_back(std::string(1, static_cast<char>('a' + i)));
  return names;
}

std::string MeshShape::ToString() const { return absl::StrJoin(sizes, "x"); }

std::string MeshShape::Declaration() const {
  std::vector<std::string> axes;
  std::vector<std::string> names = axis_names();
  for (size_t i = 0; i < sizes.size(); ++i) axes.push_back(absl::StrCat(names[i], "=", sizes[i]));
  return absl::StrCat("mesh @m(", absl::StrJoin(axes, ", "), ")");
}

std::vector<MeshShape> MeshShapes(int64_t devices, int max_axes) {
  if (devices <= 1) return {MeshShape{{1}}};
  std::vector<MeshShape> shapes;
  std::vector<int64_t> prefix;
  std::function<void(int64_t)> extend = [&](int64_t rest) {
    if (rest == 1) {
      shapes.push_back(MeshShape{prefix});
      return;
    }
    if (static_cast<int>(prefix.size()) == max_axes) return;
    for (int64_t f = 2; f <= rest; ++f) {
      if (rest % f != 0) continue;
      prefix.push_back(f);
      extend(rest / f);
      prefix.pop_back();
    }
  };
  extend(devices);
  std::stable_sort(shapes.begin(), shapes.end(), [](const MeshShape& a, const MeshShape& b) {
    if (a.sizes.size() != b.sizes.size()) return a.sizes.size() < b.sizes.size();
    return a.sizes < b.sizes;
  });
  return shapes;
}

}  // namespace commir::search
