#include "sim/placement.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir::sim {

int64_t NodeOfDevice(int64_t device, int64_t gpus_per_node) { return device / gpus_per_node; }

absl::StatusOr<GroupPlacement> PlaceGroup(absl::Span<const int64_t> devices,
                                          int64_t gpus_per_node) {
  if (gpus_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gpus per node must be at least 1, got %d", gpus_per_node));
  }
  if (devices.empty()) return absl::InvalidArgumentError("a device group needs at least one device");
  std::vector<int64_t> sorted(devices.begin(), devices.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("negative device id %d", sorted.front()));
  }
  GroupPlacement placement;
  placement.num_devices = static_cast<int64_t>(sorted.size());
  // Sorted ids visit each node's members consecutively.
  int64_t run = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device %d appears twice in a group", sorted[i]));
    }
    bool new_node = i == 0 || NodeOfDevice(sorted[i], gpus_per_node) !=
                                  NodeOfDevice(sorted[i - 1], gpus_per_node);
    if (new_node) {
      ++placement.num_nodes;
      run = 0;
    }
    placement.max_gpus_per_node = std::max(placement.max_gpus_per_node, ++run);
  }
  return placement;
}

GroupPlacement SingleNodeGroup(int64_t n) { return GroupPlacement{n, n > 0 ? 1 : 0, n}; }

}  // namespace commir::sim
