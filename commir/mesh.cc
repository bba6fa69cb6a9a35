#include "commir/mesh.h"

#include <limits>
#include <utility>

namespace commir {

Mesh::Mesh(std::string name, std::vector<MeshAxis> axes, Location loc)
    : name_(std::move(name)), axes_(std::move(axes)), loc_(loc) {}

namespace {

// a * b, or the largest int64 if that overflows (only an invalid mesh, which the
// verifier rejects, gets there; saturating keeps every caller free of UB).
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::numeric_limits<int64_t>::max();
  return product;
}

}  // namespace

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (const MeshAxis& axis : axes_) n = SaturatingMul(n, axis.size);
  return n;
}

bool Mesh::IsWellFormed() const {
  int64_t n = 1;
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].size < 1) return false;
    if (__builtin_mul_overflow(n, axes_[i].size, &n)) return false;
    for (size_t j = 0; j < i; ++j) {
      if (axes_[j].name == axes_[i].name) return false;
    }
  }
  return true;
}

std::optional<int> Mesh::AxisIndex(absl::string_view axis) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == axis) return static_cast<int>(i);
  }
  return std::nullopt;
}

int64_t Mesh::GroupSize(absl::Span<const std::string> axes) const {
  int64_t n = 1;
  for (const std::string& axis : axes) {
    std::optional<int> index = AxisIndex(axis);
    if (index) n = SaturatingMul(n, axes_[*index].size);
  }
  return n;
}

std::vector<int64_t> Mesh::Coordinates(int64_t device) const {
  std::vector<int64_t> coords(axes_.size());
  for (int i = static_cast<int>(axes_.size()) - 1; i >= 0; --i) {
    coords[i] = device % axes_[i].size;
    device /= axes_[i].size;
  }
  return coords;
}

int64_t Mesh::DeviceId(absl::Span<const int64_t> coordinates) const {
  int64_t id = 0;
  for (size_t i = 0; i < axes_.size(); ++i) id = id * axes_[i].size + coordinates[i];
  return id;
}

int64_t Mesh::GroupCoordinate(int64_t device, absl::Span<const std::string> axes) const {
  std::vector<int64_t> coords = Coordinates(device);
  int64_t position = 0;
  for (const std::string& axis : axes) {
    int index = *AxisIndex(axis);
    position = position * axes_[index].size + coords[index];
  }
  return position;
}

std::vector<int64_t> Mesh::GroupMembers(int64_t device,
                                        absl::Span<const std::string> axes) const {
  std::vector<int64_t> base = Coordinates(device);
  int64_t size = GroupSize(axes);
  std::vector<int64_t> members;
  members.reserve(size);
  for (int64_t position = 0; position < size; ++position) {
    std::vector<int64_t> coords = base;
    int64_t rest = position;
    for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
      int index = *AxisIndex(axes[i]);
      coords[index] = rest % axes_[index].size;
      rest /= axes_[index].size;
    }
    members.push_back(DeviceId(coords));
  }
  return members;
}

}  // namespace commir
