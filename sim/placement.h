// Where mesh devices run: device d (the mesh's row-major id) is GPU d % gpus_per_node of
// node d / gpus_per_node. A collective's cost depends on whether its group stays inside
// one node (NVLink) or spans nodes (the network).
#ifndef COMMIR_SIM_PLACEMENT_H_
#define COMMIR_SIM_PLACEMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir::sim {

struct GroupPlacement {
  int64_t num_devices = 0;
  int64_t num_nodes = 0;              // distinct nodes the group touches
  int64_t max_gpus_per_node = 0;      // the most group members on any one node
  bool within_one_node() const { return num_nodes <= 1; }
};

int64_t NodeOfDevice(int64_t device, int64_t gpus_per_node);

// The placement of a device group. Errors on an empty group, negative or repeated ids,
// or gpus_per_node < 1.
absl::StatusOr<GroupPlacement> PlaceGroup(absl::Span<const int64_t> devices,
                                          int64_t gpus_per_node);

// A group of `n` devices on one node (what single-node tests and benchmarks want).
GroupPlacement SingleNodeGroup(int64_t n);

}  // namespace commir::sim

#endif  // COMMIR_SIM_PLACEMENT_H_
