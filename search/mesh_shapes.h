// The meshes a search tries for a device count: every ordered factorization into at
// most three axes of size >= 2 (8 -> 8, 2x4, 4x2, 2x2x2). Order matters: devices are
// numbered row-major with the last axis fastest (docs/language.md, "Modules and meshes"), so the last axis
// groups neighbouring devices (the same node, NVLink) and the first spans nodes.
#ifndef COMMIR_SEARCH_MESH_SHAPES_H_
#define COMMIR_SEARCH_MESH_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace commir::search {

struct MeshShape {
  std::vector<int64_t> sizes;
  // Axis names: a, b, c (names carry no meaning; the layouts say what each axis splits).
  std::vector<std::string> axis_names() const;
  // "2x4"
  std::string ToString() const;
  // "mesh @m(a=2, b=4)"
  std::string Declaration() const;
};

// In order of fewer axes first, then lexicographic by sizes. A device count of 1 gives
// one mesh of a single axis of size 1.
std::vector<MeshShape> MeshShapes(int64_t devices, int max_axes = 3);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_MESH_SHAPES_H_
