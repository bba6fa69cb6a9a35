// The collective an op of a spmd function performs, seen from one device: its kind, the
// message size nccl-tests would report for it, and the devices it talks to, placed on
// nodes. This is what a timeline asks before EstimateCollective.
#ifndef COMMIR_SIM_COLLECTIVE_OP_H_
#define COMMIR_SIM_COLLECTIVE_OP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "sim/collective_time.h"
#include "sim/hardware.h"

namespace commir::sim {

struct CollectiveOpInfo {
  CollectiveKind kind = CollectiveKind::kAllGather;
  // The gathered result of an all_gather; the operand of every other collective.
  double message_bytes = 0;
  // The group over the op's axes (the mesh's device ids), or for a `shift` the device
  // with the peers it sends to and receives from (just the device when offset = 0 mod n).
  std::vector<int64_t> devices;
};

// Errors when `op` is no collective, `function` has no mesh, or `device` is not in it.
absl::StatusOr<CollectiveOpInfo> DescribeCollectiveOp(const Operation& op, const Function& function,
                                                      int64_t device);

// DescribeCollectiveOp, placed with `gpus_per_node`, then EstimateCollective.
absl::StatusOr<CollectiveEstimate> EstimateCollectiveOp(const HardwareSpec& hw, const Operation& op,
                                                        const Function& function, int64_t device,
                                                        int64_t gpus_per_node);

// Whether a `shift` of `function` seen from `device` (info from DescribeCollectiveOp) uses
// both directions of the links it sends over: its one peer both sends to it and receives
// from it (two devices, or an offset of half the axis), or its block also shifts the
// other way along the same axis (a bidirectional ring sends each step both ways).
bool ShiftUsesLinksBothWays(const Operation& op, const Function& function,
                            const CollectiveOpInfo& info);

// A `shift` of `function` moved by the copy engines, seen from `device`.
absl::StatusOr<CopyEngineEstimate> EstimateCopyEngineShift(const HardwareSpec& hw,
                                                           const Operation& op,
                                                           const Function& function,
                                                           int64_t device);

}  // namespace commir::sim

#endif  // COMMIR_SIM_COLLECTIVE_OP_H_
