#include "sim/attention_time.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/attention_op.h"
#include "commir/element_type.h"
#include "sim/op_time.h"

namespace commir::sim {
namespace {

// Sums and bounds of up to a few times the int64 range: sizes and positions are int64.
using Wide = __int128;

constexpr Wide kTile = kAttentionTile;

Wide FloorDiv(Wide a, Wide b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
Wide CeilDiv(Wide a, Wide b) { return -FloorDiv(-a, b); }
Wide Clamp(Wide x, Wide lo, Wide hi) { return std::min(std::max(x, lo), hi); }

// sum over i in [0, n) of clamp(i + a, 0, cap), cap >= 0: the zero part, the rising
// part a+lo .. a+hi (an arithmetic series), and the part at the cap.
double SumClampedRamp(Wide n, Wide a, Wide cap) {
  if (n <= 0 || cap <= 0) return 0;
  const Wide lo = std::max<Wide>(0, 1 - a);
  const Wide hi = std::min<Wide>(n - 1, cap - 1 - a);
  double sum = 0;
  if (lo <= hi) {
    sum += static_cast<double>(hi - lo + 1) * (static_cast<double>(lo + a) + static_cast<double>(hi + a)) / 2;
  }
  const Wide at_cap = n - std::max<Wide>(0, cap - a);
  if (at_cap > 0) sum += static_cast<double>(std::min(at_cap, n)) * static_cast<double>(cap);
  return sum;
}

// The op table's average share of the pairs a causal mask keeps (commir/ops/linalg_ops.cc).
double AverageCausalShare(const AttentionGeometry& g) { return g.queries == g.keys ? 0.5 : 1.0; }

AttentionTiles FullTiles(Wide ctas, Wide per_cta) {
  AttentionTiles t;
  t.ctas = static_cast<double>(ctas);
  t.busy_ctas = per_cta > 0 ? t.ctas : 0;
  t.blocks = t.ctas * static_cast<double>(per_cta);
  t.max_blocks = static_cast<double>(per_cta);
  return t;
}

AttentionTiles AveragedTiles(const AttentionGeometry& g, AttentionTiles full) {
  full.blocks *= AverageCausalShare(g);
  return full;
}

}  // namespace

int64_t ClampedOffset(int64_t q_pos, int64_t k_pos, int64_t queries, int64_t keys) {
  return static_cast<int64_t>(Clamp(Wide{q_pos} - Wide{k_pos}, -Wide{queries}, Wide{keys}));
}

double VisiblePairs(const AttentionGeometry& g) {
  if (g.queries <= 0 || g.keys <= 0) return 0;
  const double all = static_cast<double>(g.queries) * static_cast<double>(g.keys);
  if (!g.causal) return all;
  if (!g.offset.has_value()) return all * AverageCausalShare(g);
  // Query i sees keys j <= i + offset: clamp(i + offset + 1, 0, keys) of them.
  return SumClampedRamp(g.queries, Wide{*g.offset} + 1, g.keys);
}

AttentionTiles ForwardTiles(const AttentionGeometry& g) {
  if (g.queries <= 0) return {};
  const Wide q_tiles = CeilDiv(g.queries, kTile);
  const Wide k_tiles = g.keys > 0 ? CeilDiv(g.keys, kTile) : 0;
  AttentionTiles full = FullTiles(q_tiles, k_tiles);
  if (!g.causal) return full;
  if (!g.offset.has_value()) return AveragedTiles(g, full);
  const Wide offset = *g.offset;
  // Query tile t walks the key blocks up to its last query's last visible key: that query,
  // 128(t+1) - 1, sees clamp(128(t+1) + offset, 0, keys) keys, so the tile walks
  // clamp(t + 1 + ceil(offset / 128), 0, k_tiles) blocks. The last tile may be short.
  const Wide shift = 1 + CeilDiv(offset, kTile);
  const Wide last = CeilDiv(Clamp(Wide{g.queries} + offset, 0, g.keys), kTile);
  AttentionTiles t;
  t.ctas = static_cast<double>(q_tiles);
  t.blocks = SumClampedRamp(q_tiles - 1, shift, k_tiles) + static_cast<double>(last);
  // The blocks grow with t: the tiles that walk none come first, the last walks most.
  const Wide idle_full = Clamp(1 - shift, 0, q_tiles - 1);
  t.busy_ctas = static_cast<double>(q_tiles - 1 - idle_full + (last > 0 ? 1 : 0));
  t.max_blocks = static_cast<double>(last);
  return t;
}

AttentionTiles BackwardTiles(const AttentionGeometry& g) {
  if (g.keys <= 0) return {};
  const Wide q_tiles = g.queries > 0 ? CeilDiv(g.queries, kTile) : 0;
  const Wide k_tiles = CeilDiv(g.keys, kTile);
  AttentionTiles full = FullTiles(k_tiles, q_tiles);
  if (!g.causal) return full;
  if (!g.offset.has_value()) return AveragedTiles(g, full);
  if (q_tiles == 0) return full;
  const Wide offset = *g.offset;
  // Key tile u walks the query tiles whose last query sees its first key 128u, i.e. the
  // tiles t whose last query min(128t + 127, queries - 1) >= 128u - offset. Of the full
  // tiles (t < q_tiles - 1) those are t >= u + c0, c0 = ceil((1 - offset) / 128) - 1:
  // clamp(q_tiles - 1 - c0 - u, 0, q_tiles - 1) of them, a ramp falling with u. The last
  // tile is walked by the key tiles with 128u <= queries - 1 + offset.
  const Wide c0 = CeilDiv(1 - offset, kTile) - 1;
  const Wide last_walkers = Clamp(FloorDiv(Wide{g.queries} - 1 + offset, kTile) + 1, 0, k_tiles);
  AttentionTiles t;
  t.ctas = static_cast<double>(k_tiles);
  // Summed from u = k_tiles - 1 down: w = k_tiles - 1 - u rises.
  t.blocks = SumClampedRamp(k_tiles, q_tiles - c0 - k_tiles, q_tiles - 1) +
             static_cast<double>(last_walkers);
  // A key tile that walks a full tile walks the last one too: the walkers of the last
  // tile are the busy ones, and key tile 0 walks most.
  t.busy_ctas = static_cast<double>(last_walkers);
  t.max_blocks = static_cast<double>(Clamp(q_tiles - 1 - c0, 0, q_tiles - 1) + (last_walkers > 0 ? 1 : 0));
  return t;
}

bool AttentionTimeDependsOnPositions(const Operation& op) {
  if (op.Is(OpKind::kAttention)) {
    return op.BoolAttr("causal") && op.num_operands() > AttentionOp::kQPos;
  }
  if (op.Is(OpKind::kAttentionGrad)) {
    return op.BoolAttr("causal") && op.num_operands() > AttentionGradOp::kQPos;
  }
  return false;
}

absl::StatusOr<AttentionKernel> AttentionKernelTime(
    const HardwareSpec& hw, const Operation& op, const Function& /*function*/,
    std::optional<absl::Span<const int64_t>> indices) {
  const bool forward = op.Is(OpKind::kAttention);
  if (!forward && !op.Is(OpKind::kAttentionGrad)) {
    return absl::InvalidArgumentError(absl::StrCat("'", op.def().name, "' is not attention"));
  }
  for (int i = 0; i < 3; ++i) {
    if (!op.operand(i)->type().is_tensor() || op.operand(i)->type().rank() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(op.def().name, " q, k and v must have rank 4"));
    }
  }
  const std::vector<int64_t>& q = op.operand(0)->type().dims();
  const std::vector<int64_t>& k = op.operand(1)->type().dims();
  const std::vector<int64_t>& v = op.operand(2)->type().dims();
  AttentionGeometry g;
  g.queries = q[2];
  g.keys = k[2];
  g.causal = op.BoolAttr("causal");
  AttentionKernel kernel;
  if (g.causal) {
    if (!AttentionTimeDependsOnPositions(op)) {
      g.offset = ClampedOffset(g.keys - g.queries, 0, g.queries, g.keys);  // the defaults
    } else if (indices.has_value() && !indices->empty()) {
      const int64_t k_pos = indices->size() > 1 ? (*indices)[1] : 0;
      g.offset = ClampedOffset((*indices)[0], k_pos, g.queries, g.keys);
    } else {
      kernel.positions_unknown = true;
    }
  }
  // Per (query, key) pair: q k^T and p v forward; the backward recomputes q k^T and adds
  // dout v^T, p^T dout, ds k and ds^T q (commir/ops/linalg_ops.cc counts the same).
  const double dqk = static_cast<double>(q[3]), dv = static_cast<double>(v[3]);
  const double pair_flops = forward ? 2 * (dqk + dv) : 2 * (3 * dqk + 2 * dv);
  const double batch_heads = static_cast<double>(q[0]) * static_cast<double>(q[1]);
  kernel.flops = batch_heads * VisiblePairs(g) * pair_flops;

  const AttentionTiles tiles = forward ? ForwardTiles(g) : BackwardTiles(g);
  const double fraction = forward ? hw.attention_peak_fraction : hw.attention_backward_peak_fraction;
  const double overhead =
      forward ? hw.attention_tile_overhead_blocks : hw.attention_backward_tile_overhead_blocks;
  double compute_s = 0;
  if (tiles.busy_ctas > 0 && hw.sm_count > 0) {
    const double sms = hw.sm_count;
    const double type_peak = MatmulPeakFlops(hw, op.operand(0)->type().element_type());
    // One block on one SM, at that SM's share of the rate.
    const double block_s = static_cast<double>(kTile * kTile) * pair_flops * sms / (type_peak * fraction);
    const double busy = batch_heads * tiles.busy_ctas;
    const double total = batch_heads * (tiles.busy_ctas * overhead + tiles.blocks) * block_s;
    compute_s = std::max(total / (sms * WaveEfficiency(busy, hw.sm_count)),
                         (overhead + tiles.max_blocks) * block_s);
  }
  // Every input is streamed once by the CTAs that work (an idle CTA reads nothing); every
  // output is written (zeros where no key is seen).
  double in_bytes = 0, out_bytes = 0;
  for (const Value* operand : op.operands()) {
    if (operand->type().is_tensor()) {
      in_bytes += static_cast<double>(ElementTypeByteWidth(operand->type().element_type())) *
                  static_cast<double>(operand->type().num_elements());
    }
  }
  for (int r = 0; r < op.num_results(); ++r) {
    const Type type = op.result(r)->type();
    if (type.is_tensor()) {
      out_bytes += static_cast<double>(ElementTypeByteWidth(type.element_type())) *
                   static_cast<double>(type.num_elements());
    }
  }
  const double busy_share = tiles.ctas > 0 ? tiles.busy_ctas / tiles.ctas : 0;
  const double bytes = out_bytes + in_bytes * busy_share;
  kernel.seconds = hw.kernel_launch_overhead_s + std::max(compute_s, bytes / hw.hbm_bandwidth);
  return kernel;
}

}  // namespace commir::sim
