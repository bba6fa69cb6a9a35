#include "sim/collective_op.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "commir/element_type.h"
#include "commir/mesh.h"
#include "sim/placement.h"

namespace commir::sim {
namespace {

double TensorBytes(const Type& type) {
  if (!type.is_tensor()) return 0;
  return static_cast<double>(type.num_elements()) * ElementTypeByteWidth(type.element_type());
}

}  // namespace

absl::StatusOr<CollectiveOpInfo> DescribeCollectiveOp(const Operation& op, const Function& function,
                                                      int64_t device) {
  std::optional<CollectiveKind> kind = CollectiveKindOf(op.kind());
  if (!kind.has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a collective", op.def().name));
  }
  const Mesh* mesh = function.mesh();
  if (mesh == nullptr || !mesh->IsWellFormed()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' needs a function with a valid mesh", op.def().name));
  }
  if (device < 0 || device >= mesh->num_devices()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d is not in mesh @%s of %d devices", device, mesh->name(), mesh->num_devices()));
  }
  const Attribute* axis = op.attrs().Find("axis");
  if (axis == nullptr) return absl::InvalidArgumentError(absl::StrFormat("'%s' has no axis", op.def().name));
  const AxisList axes = axis->axes();

  CollectiveOpInfo info;
  info.kind = *kind;
  info.message_bytes = *kind == CollectiveKind::kAllGather ? TensorBytes(op.result(0)->type())
                                                           : TensorBytes(op.operand(0)->type());
  std::vector<int64_t> group = mesh->GroupMembers(device, axes);
  if (*kind != CollectiveKind::kSendRecv) {
    info.devices = std::move(group);
    return info;
  }
  // A shift sends to coordinate c+offset and receives from c-offset (mod n).
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t c = mesh->GroupCoordinate(device, axes);
  const int64_t offset = ((op.IntAttr("offset") % n) + n) % n;
  info.devices = {device};
  for (int64_t peer : {group[(c + offset) % n], group[(c - offset + n) % n]}) {
    if (std::find(info.devices.begin(), info.devices.end(), peer) == info.devices.end()) {
      info.devices.push_back(peer);
    }
  }
  return info;
}

absl::StatusOr<CollectiveEstimate> EstimateCollectiveOp(const HardwareSpec& hw, const Operation& op,
                                                        const Function& function, int64_t device,
                                                        int64_t gpus_per_node) {
  absl::StatusOr<CollectiveOpInfo> info = DescribeCollectiveOp(op, function, device);
  if (!info.ok()) return info.status();
  absl::StatusOr<GroupPlacement> placement = PlaceGroup(info->devices, gpus_per_node);
  if (!placement.ok()) return placement.status();
  return EstimateCollective(hw, info->kind, info->message_bytes, *placement);
}

namespace {

// The shift's offset reduced into [0, n) for an axis group of n devices.
int64_t ReducedOffset(const Operation& shift, int64_t n) {
  return ((shift.IntAttr("offset") % n) + n) % n;
}

}  // namespace

bool ShiftUsesLinksBothWays(const Operation& op, const Function& function,
                            const CollectiveOpInfo& info) {
  // The device and one peer: that peer is both where it sends and where it receives from.
  if (info.devices.size() == 2) return true;
  if (info.devices.size() < 2 || op.parent_block() == nullptr || function.mesh() == nullptr) {
    return false;
  }
  const Attribute* axis = op.attrs().Find("axis");
  if (axis == nullptr) return false;
  const int64_t n =
      static_cast<int64_t>(function.mesh()->GroupMembers(info.devices[0], axis->axes()).size());
  const int64_t offset = ReducedOffset(op, n);
  for (const Operation* other : *op.parent_block()) {
    if (other == &op || !other->Is(OpKind::kShift)) continue;
    const Attribute* other_axis = other->attrs().Find("axis");
    if (other_axis == nullptr || !(*other_axis == *axis)) continue;
    if (ReducedOffset(*other, n) == (n - offset) % n) return true;
  }
  return false;
}

absl::StatusOr<CopyEngineEstimate> EstimateCopyEngineShift(const HardwareSpec& hw,
                                                           const Operation& op,
                                                           const Function& function,
                                                           int64_t device) {
  absl::StatusOr<CollectiveOpInfo> info = DescribeCollectiveOp(op, function, device);
  if (!info.ok()) return info.status();
  if (info->kind != CollectiveKind::kSendRecv) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is no shift: copy engines move only peer copies", op.def().name));
  }
  // A shift by a multiple of the axis sends nothing (the device is its own peer).
  const double bytes = info->devices.size() < 2 ? 0 : info->message_bytes;
  return EstimateCopyEngineTransfer(hw, bytes, ShiftUsesLinksBothWays(op, function, *info));
}

}  // namespace commir::sim
