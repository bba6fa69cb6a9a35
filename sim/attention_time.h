// Time of one fused attention kernel (attention, attention_grad) from where its queries
// and keys sit, as FlashAttention runs it.
//
// The kernel. Forward: one CTA per 128 queries of one (batch, query head); it walks the
// key blocks of 128 from the first up to the last one any of its queries may see, and
// computes each block in full (the causal mask zeroes part of the diagonal block after
// the products). A CTA whose queries see no key exits at once (zero output, lse -inf).
// Backward: one CTA per 128 keys, walking the query blocks from the first that sees one
// of its keys to the last. Each CTA also pays a fixed cost (loading its tile, the
// epilogue), counted in blocks. So a CTA of b blocks takes (overhead + b) block times.
// The CTAs of all (batch, head) pairs share the SMs: their total time over the SMs, with
// the wave quantization of their count (as for GEMMs), never less than the longest one.
//
// The parameters (hardware.h) come from FlashAttention's published H100 curves
// (calibration.md, head dim 128, 16 heads, batch 16k/seq): fitted on the non-causal
// curves, checked against the causal ones (benchmarks/sim_calibration.md). The forward
// follows FlashAttention-3's forward: it is the Hopper kernel, measured alone. The
// backward follows FlashAttention-2's forward+backward curve read as the backward's rate
// (its FLOPs are 2.5 of the 3.5): the only published curve with a backward in it.
//
// Positions: query i is at q_pos + i and key j at k_pos + j, so the mask depends on
// their offset alone. A causal block whose keys all come after its queries is empty (the
// kernel exits: launch and output writes only); one whose keys all come before is
// full (the non-causal work); in between it is partial. Every count here is a closed
// form in the offset, not a loop over tiles.
#ifndef COMMIR_SIM_ATTENTION_TIME_H_
#define COMMIR_SIM_ATTENTION_TIME_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "sim/hardware.h"

namespace commir::sim {

// The tile FlashAttention's H100 kernels use for head dim 128: 128 queries x 128 keys.
inline constexpr int64_t kAttentionTile = 128;

// One (batch, head) of the block: its query and key counts and the mask.
struct AttentionGeometry {
  int64_t queries = 0;
  int64_t keys = 0;
  bool causal = false;
  // q_pos - k_pos, clamped to [-queries, keys] (beyond, the block is as empty or as full
  // as at the bound). nullopt: the positions are not known (see below).
  std::optional<int64_t> offset;
};

// The offset of `q_pos` and `k_pos`, clamped as AttentionGeometry::offset (no overflow).
int64_t ClampedOffset(int64_t q_pos, int64_t k_pos, int64_t queries, int64_t keys);

// The (query, key) pairs the mask keeps, per (batch, head): exact when the offset is
// known or the attention is not causal. With a causal mask and unknown positions, the
// average the op table uses (half the pairs when queries and keys are as many).
double VisiblePairs(const AttentionGeometry& g);

// The kernel's CTAs per (batch, head): how many, how many do any work, the blocks they
// visit in all, and the most one visits.
struct AttentionTiles {
  double ctas = 0;
  double busy_ctas = 0;
  double blocks = 0;
  double max_blocks = 0;
};
// Unknown causal positions: the non-causal tiles with the blocks scaled by the op table's
// average (as VisiblePairs).
AttentionTiles ForwardTiles(const AttentionGeometry& g);
AttentionTiles BackwardTiles(const AttentionGeometry& g);

struct AttentionKernel {
  double seconds = 0;  // launch included
  double flops = 0;    // of the visible pairs
  bool positions_unknown = false;
};

// The kernel of `op` (attention or attention_grad) of `function`. `indices` are the
// values of its index operands (q_pos, then k_pos if written), as the interpreter hands
// them to a backend; nullopt when they are not known, which prices a causal op that
// writes positions at the average and says so in positions_unknown.
absl::StatusOr<AttentionKernel> AttentionKernelTime(
    const HardwareSpec& hw, const Operation& op, const Function& function,
    std::optional<absl::Span<const int64_t>> indices);

// Whether the kernel of `op` depends on its index operands' values: a causal attention
// or attention_grad that writes q_pos.
bool AttentionTimeDependsOnPositions(const Operation& op);

}  // namespace commir::sim

#endif  // COMMIR_SIM_ATTENTION_TIME_H_
