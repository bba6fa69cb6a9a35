#include "backend_cuda/comm/partition.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace commir::cuda::comm {
namespace {

std::vector<int64_t> Coordinates(absl::Span<const int64_t> shape, int64_t device) {
  std::vector<int64_t> coords(shape.size());
  for (int axis = static_cast<int>(shape.size()) - 1; axis >= 0; --axis) {
    coords[axis] = device % shape[axis];
    device /= shape[axis];
  }
  return coords;
}

}  // namespace

uint64_t GroupAxesMask(absl::Span<const int64_t> mesh_shape, absl::Span<const int64_t> group) {
  uint64_t mask = 0;
  if (group.empty()) return mask;
  std::vector<int64_t> first = Coordinates(mesh_shape, group[0]);
  for (int64_t device : group) {
    std::vector<int64_t> coords = Coordinates(mesh_shape, device);
    for (size_t axis = 0; axis < mesh_shape.size(); ++axis) {
      if (coords[axis] != first[axis]) mask |= uint64_t{1} << axis;
    }
  }
  return mask;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> InferPartition(
    absl::Span<const int64_t> mesh_shape, absl::Span<const int64_t> group) {
  int64_t mesh_size = 1;
  for (int64_t size : mesh_shape) {
    if (size < 1) return absl::InvalidArgumentError("mesh axis sizes must be >= 1");
    mesh_size *= size;
  }
  if (mesh_shape.size() > 63) return absl::InvalidArgumentError("too many mesh axes");
  if (group.empty()) return absl::InvalidArgumentError("empty device group");
  for (int64_t device : group) {
    if (device < 0 || device >= mesh_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device %d is outside the mesh of %d devices", device, mesh_size));
    }
  }
  const uint64_t mask = GroupAxesMask(mesh_shape, group);
  std::vector<size_t> axes;  // the group's axes, in mesh order
  int64_t size = 1;
  for (size_t axis = 0; axis < mesh_shape.size(); ++axis) {
    if (mask & (uint64_t{1} << axis)) {
      axes.push_back(axis);
      size *= mesh_shape[axis];
    }
  }
  auto not_a_group = [&]() {
    return absl::InvalidArgumentError(absl::StrFormat(
        "devices [%s] are not one group of the mesh in coordinate order",
        absl::StrJoin(group, ",")));
  };
  if (static_cast<int64_t>(group.size()) != size) return not_a_group();

  // An axis group lists its members first axis major in the order its axes are WRITTEN,
  // e.g. (tp, dp) on a (dp, tp) mesh is not ascending device order. Find the
  // order of the group's axes that lists exactly `group`; mesh order is tried first.
  std::vector<std::vector<int64_t>> coords;
  coords.reserve(group.size());
  for (int64_t device : group) coords.push_back(Coordinates(mesh_shape, device));
  auto lists_group = [&](const std::vector<size_t>& order) {
    for (size_t p = 0; p < group.size(); ++p) {
      int64_t rest = static_cast<int64_t>(p);
      for (size_t i = order.size(); i-- > 0;) {
        if (coords[p][order[i]] != rest % mesh_shape[order[i]]) return false;
        rest /= mesh_shape[order[i]];
      }
    }
    return true;
  };
  std::vector<size_t> order = axes;
  bool found = false;
  do {
    found = lists_group(order);
  } while (!found && std::next_permutation(order.begin(), order.end()));
  if (!found) return not_a_group();

  // Every group of the partition in that same order: the member at position p of the
  // group based at device b has b's other coordinates and group[p]'s group coordinates.
  // A group's first member has group coordinates 0; groups appear by first member.
  std::vector<std::vector<int64_t>> groups;
  for (int64_t base = 0; base < mesh_size; ++base) {
    std::vector<int64_t> base_coords = Coordinates(mesh_shape, base);
    bool first = true;
    for (size_t axis : axes) first &= base_coords[axis] == 0;
    if (!first) continue;
    std::vector<int64_t>& members = groups.emplace_back();
    for (size_t p = 0; p < group.size(); ++p) {
      std::vector<int64_t> c = base_coords;
      for (size_t axis : axes) c[axis] = coords[p][axis];
      int64_t id = 0;
      for (size_t axis = 0; axis < mesh_shape.size(); ++axis) id = id * mesh_shape[axis] + c[axis];
      members.push_back(id);
    }
  }
  return groups;
}

}  // namespace commir::cuda::comm
