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
  // Device 0's group is as spread as any other: every group is a translate of it.
  for (int64_t member : mesh.GroupMembers(0, axes)) {
    if (member / per_node != 0) {
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
