#include "sim/op_time.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/op_cost.h"
#include "runtime/in_place.h"
#include "sim/attention_time.h"
#include "sim/collective_time.h"
#include "sim/gemm_views.h"
#include "sim/moe_exchange_views.h"

namespace commir::sim {
namespace {


double CeilDiv(double a, double b) { return std::ceil(a / b); }

double RooflineTime(const HardwareSpec& hw, double compute_s, double bytes) {
  return hw.kernel_launch_overhead_s + std::max(compute_s, bytes / hw.hbm_bandwidth);
}

}  // namespace

double WaveEfficiency(double tiles, int sm_count) {
  if (tiles <= 0 || sm_count <= 0) return 1;
  return tiles / (CeilDiv(tiles, sm_count) * sm_count);
}


double MemoryBoundTime(const HardwareSpec& hw, double flops, double bytes) {
  return RooflineTime(hw, flops / hw.peak_flops_f32, bytes);
}

absl::StatusOr<double> OpTime(const HardwareSpec& hw, const Operation& op, const Function& function) {
  if (CollectiveKindOf(op.kind()).has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is a collective: its time depends on its device group (EstimateCollective)",
        op.def().name));
  }
  switch (op.kind()) {
    case OpKind::kFor:   // its body's ops are timed one by one
    case OpKind::kCall:  // so are its callee's
    case OpKind::kReturn:
    case OpKind::kYield:
    case OpKind::kRank:
      return 0.0;
    default:
      break;
  }
  // A block a GEMM reads or writes in place is a pointer offset, not a copy
  // (gemm_views.h). Among them, the matmul that makes an update's block stores it at its
  // place in the destination (the GEMM's output pointer and row stride; runtime/in_place.h),
  // which the cpu and cuda backends do: the update runs no kernel, and the matmul's price
  // already writes the block once.
  if (IsGemmBlockInPlace(op)) return 0.0;
  // So is a chunk an all_to_all sends or receives in place (moe_exchange_views.h).
  if (IsExchangeBlockInPlace(op)) return 0.0;
  // A buffer every element of which is written before it is read is allocated without a
  // fill (runtime/in_place.h), as the cpu and cuda backends do.
  if (op.Is(OpKind::kFull) && runtime::FillOverwrittenBeforeRead(op)) return 0.0;
  OpCost cost = EstimateOpCost(op, function);
  if (cost.flops == 0 && cost.bytes_accessed == 0) return 0.0;  // a view: no kernel
  if (op.Is(OpKind::kMatmul)) {
    const std::vector<int64_t>& out = op.result(0)->type().dims();
    if (out.size() < 2) return absl::InvalidArgumentError("matmul result must have rank >= 2");
    GemmShape shape;
    for (size_t i = 0; i + 2 < out.size(); ++i) shape.batch *= static_cast<double>(out[i]);
    shape.m = out[out.size() - 2];
    shape.n = out.back();
    shape.type = op.operand(0)->type().element_type();
    shape.result_element_bytes = ElementTypeByteWidth(op.result(0)->type().element_type());
    double outputs = shape.batch * static_cast<double>(shape.m) * static_cast<double>(shape.n);
    if (outputs == 0) return 0.0;
    // The op table's FLOPs are 2 x outputs x K; its bytes are A, B and C.
    shape.k = std::llround(cost.flops / (2 * outputs));
    shape.operand_bytes = std::max(0.0, cost.bytes_accessed - outputs * shape.result_element_bytes);
    return GemmTime(hw, shape);
  }
  // Positions not given here: a causal op that writes them is priced at the average.
  if (op.Is(OpKind::kAttention) || op.Is(OpKind::kAttentionGrad)) {
    absl::StatusOr<AttentionKernel> kernel = AttentionKernelTime(hw, op, function, std::nullopt);
    if (!kernel.ok()) return kernel.status();
    return kernel->seconds;
  }
  double seconds = MemoryBoundTime(hw, cost.flops, cost.bytes_accessed);
  // cross_entropy is two kernels on the cuda backend: one block per row of logits, then a
  // one-block launch that reduces or stores the token losses (backend_cuda/kernels/
  // cross_entropy.h); its bytes are the logits', read once from memory.
  if (op.Is(OpKind::kCrossEntropy)) seconds += hw.kernel_launch_overhead_s;
  return seconds;
}

}  // namespace commir::sim
