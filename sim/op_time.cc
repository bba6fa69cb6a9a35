#include "sim/op_time.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/op_cost.h"
#include "sim/attention_time.h"
#include "sim/collective_time.h"

namespace commir::sim {
namespace {

struct Tile {
  int64_t m, n;
};
// The CTA tiles Hopper/Ampere cuBLAS kernels mostly use for large bf16 GEMMs.
constexpr Tile kGemmTiles[] = {{128, 256}, {256, 128}, {128, 128}};

double CeilDiv(double a, double b) { return std::ceil(a / b); }

double RooflineTime(const HardwareSpec& hw, double compute_s, double bytes) {
  return hw.kernel_launch_overhead_s + std::max(compute_s, bytes / hw.hbm_bandwidth);
}

}  // namespace

double WaveEfficiency(double tiles, int sm_count) {
  if (tiles <= 0 || sm_count <= 0) return 1;
  return tiles / (CeilDiv(tiles, sm_count) * sm_count);
}

double MatmulPeakFlops(const HardwareSpec& hw, ElementType type) {
  switch (type) {
    case ElementType::kBF16:
    case ElementType::kF16:
      return hw.peak_flops_bf16;
    case ElementType::kF32:
      return hw.f32_matmul_uses_tf32 ? hw.peak_flops_tf32 : hw.peak_flops_f32;
    default:
      return hw.peak_flops_f32;
  }
}

double GemmTileEfficiency(const HardwareSpec& hw, double batch, int64_t m, int64_t n) {
  if (batch <= 0 || m <= 0 || n <= 0) return 1;
  double best = 0;
  for (const Tile& tile : kGemmTiles) {
    double tiles = batch * CeilDiv(m, tile.m) * CeilDiv(n, tile.n);
    double slots = CeilDiv(tiles, hw.sm_count) * hw.sm_count;  // tiles the waves could hold
    double useful = batch * static_cast<double>(m) * static_cast<double>(n);
    best = std::max(best, useful / (slots * static_cast<double>(tile.m * tile.n)));
  }
  return best;
}

double MatmulTime(const HardwareSpec& hw, ElementType type, double batch, int64_t m, int64_t n,
                  double flops, double bytes) {
  double rate = MatmulPeakFlops(hw, type) * hw.gemm_peak_fraction * GemmTileEfficiency(hw, batch, m, n);
  return RooflineTime(hw, flops / rate, bytes);
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
  OpCost cost = EstimateOpCost(op, function);
  if (cost.flops == 0 && cost.bytes_accessed == 0) return 0.0;  // a view: no kernel
  if (op.Is(OpKind::kMatmul)) {
    const std::vector<int64_t>& out = op.result(0)->type().dims();
    if (out.size() < 2) return absl::InvalidArgumentError("matmul result must have rank >= 2");
    double batch = 1;
    for (size_t i = 0; i + 2 < out.size(); ++i) batch *= static_cast<double>(out[i]);
    return MatmulTime(hw, op.operand(0)->type().element_type(), batch, out[out.size() - 2],
                      out.back(), cost.flops, cost.bytes_accessed);
  }
  // Positions not given here: a causal op that writes them is priced at the average.
  if (op.Is(OpKind::kAttention) || op.Is(OpKind::kAttentionGrad)) {
    absl::StatusOr<AttentionKernel> kernel = AttentionKernelTime(hw, op, function, std::nullopt);
    if (!kernel.ok()) return kernel.status();
    return kernel->seconds;
  }
  return MemoryBoundTime(hw, cost.flops, cost.bytes_accessed);
}

}  // namespace commir::sim
