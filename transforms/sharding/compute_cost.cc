#include "transforms/sharding/compute_cost.h"

#include <algorithm>
#include <vector>

namespace commir::sharding {

namespace {

// The matmul peak of an element type (sim/gemm_time.h's MatmulPeakFlops on the device
// above): bf16 and f16 on the tensor cores, everything else on plain f32.
double PeakFlops(ElementType type) {
  switch (type) {
    case ElementType::kBF16:
    case ElementType::kF16:
      return kPartitionerDevice.peak_flops_bf16;
    default:
      return kPartitionerDevice.peak_flops_f32;
  }
}

}  // namespace

OpCost GlobalOpCost(const Operation& op, absl::Span<const Type> operand_types, const Mesh* mesh) {
  if (op.def().cost == nullptr) return {};
  std::vector<Type> result_types;
  result_types.reserve(op.num_results());
  for (int r = 0; r < op.num_results(); ++r) result_types.push_back(op.result(r)->type());
  OpSignature sig{operand_types, op.attrs(), result_types, op.num_results(), mesh, false};
  return op.def().cost(sig, result_types);
}

double CollectiveByteWeight(const Mesh& mesh, const AxisList& axes) {
  const int64_t per_node = std::max(1, kPartitionerDevice.gpus_per_node);
  if (mesh.GroupSize(axes) <= 1) return 1;
  // Ids are linear in the coordinates, so a group is its leader (the member whose
  // coordinates over `axes` are 0) plus device 0's group's ids: it stays on one node
  // when its leader and its leader plus the largest of those offsets do.
  // Groups are not all alike: on (a=2, b=6) the b group {0..5} is on one node of 8,
  // {6..11} spans two.
  const std::vector<int64_t> offsets = mesh.GroupMembers(0, axes);
  const int64_t last = *std::max_element(offsets.begin(), offsets.end());
  for (int64_t device = 0; device < mesh.num_devices(); ++device) {
    if (mesh.GroupCoordinate(device, axes) != 0) continue;
    if (device / per_node != (device + last) / per_node) {
      return kLinkBytesPerSecond / kPartitionerDevice.network_bandwidth_per_gpu;
    }
  }
  return 1;
}

double ComputeSeconds(const OpCost& global, ElementType type, double blocks) {
  double seconds = std::max(global.flops / PeakFlops(type),
                            global.bytes_accessed / kPartitionerDevice.hbm_bandwidth);
  return seconds / std::max(1.0, blocks);
}

double ComputeCostBytes(const OpCost& global, ElementType type, double blocks) {
  return ComputeSeconds(global, type, blocks) * kLinkBytesPerSecond;
}

}  // namespace commir::sharding
