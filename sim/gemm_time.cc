#include "sim/gemm_time.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir::sim {
namespace {

// Split-K partials are f32 accumulators whatever the result type.
constexpr double kPartialBytes = 4;
// A k-block (one pipeline stage of a CTA's main loop) spans 128 bytes of K: 64 bf16
// elements, 32 f32 ones.
constexpr double kKBlockBytes = 128;

double CeilDiv(double a, double b) { return std::ceil(a / b); }

}  // namespace

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

double GemmCandidateTime(const HardwareSpec& hw, const GemmShape& shape, int sms,
                         GemmTile tile, int split_k) {
  const double elem = ElementTypeByteWidth(shape.type);
  const double tm = static_cast<double>(tile.m), tn = static_cast<double>(tile.n);
  const double m = static_cast<double>(shape.m), n = static_cast<double>(shape.n);
  const double k = static_cast<double>(shape.k);
  const double outputs = shape.batch * m * n;

  // Per SM: the tensor cores' share of the peak, or what the operand bandwidth can feed
  // this tile (2 TM TN FLOPs per (TM + TN) x elem bytes of A and B per k step).
  const double mma_rate = MatmulPeakFlops(hw, shape.type) / hw.sm_count * hw.gemm_peak_fraction;
  const double feed_rate =
      hw.gemm_operand_bandwidth / hw.sm_count * (2 * tm * tn) / ((tm + tn) * elem);
  const double rate = std::min(mma_rate, feed_rate);

  const double tiles = shape.batch * CeilDiv(m, tm) * CeilDiv(n, tn);
  const double ctas = tiles * split_k;
  const double waves = CeilDiv(ctas, sms);
  const double k_block = kKBlockBytes / elem;
  const double k_cta = CeilDiv(CeilDiv(k, split_k), k_block) * k_block;

  // What the epilogues store: the result, or s f32 partials of it with split-K.
  const double stored_element_bytes = split_k == 1 ? shape.result_element_bytes : kPartialBytes;
  const double stored_bytes = outputs * stored_element_bytes * split_k;
  const double last_wave_ctas = std::min(ctas, static_cast<double>(sms));
  const double last_epilogue = last_wave_ctas * tm * tn * stored_element_bytes / hw.hbm_bandwidth;
  const double main_loop = waves * 2 * tm * tn * k_cta / rate + last_epilogue;
  const double memory = (shape.operand_bytes + stored_bytes) / hw.hbm_bandwidth;
  double time = hw.kernel_launch_overhead_s + waves * hw.gemm_wave_latency_s +
                std::max(main_loop, memory);
  if (split_k > 1) {
    // The reduction reads every partial back and writes the result once.
    time += hw.gemm_wave_latency_s +
            (stored_bytes + outputs * shape.result_element_bytes) / hw.hbm_bandwidth;
  }
  return time;
}

namespace {

// Everything a plan depends on. The searches price the same few GEMM shapes millions of
// times, so plans are memoized per thread.
using PlanKey = std::tuple<double, int64_t, int64_t, int64_t, int, double, double, int,
                           double, double, double, double, double, double>;

PlanKey KeyOf(const HardwareSpec& hw, const GemmShape& shape, int sms) {
  return {shape.batch,         shape.m,
          shape.n,             shape.k,
          static_cast<int>(shape.type), shape.operand_bytes,
          shape.result_element_bytes, sms,
          MatmulPeakFlops(hw, shape.type) / hw.sm_count, hw.gemm_peak_fraction,
          hw.gemm_operand_bandwidth / hw.sm_count, hw.gemm_wave_latency_s,
          hw.kernel_launch_overhead_s, hw.hbm_bandwidth};
}

constexpr size_t kMaxCachedPlans = 1 << 14;

GemmPlan SearchPlan(const HardwareSpec& hw, const GemmShape& shape, int sms) {
  GemmPlan best;
  const double elem = ElementTypeByteWidth(shape.type);
  const double k_blocks = std::ceil(static_cast<double>(shape.k) / (kKBlockBytes / elem));
  const double outputs =
      shape.batch * static_cast<double>(shape.m) * static_cast<double>(shape.n);
  const double flops = 2 * outputs * static_cast<double>(shape.k);
  const double mma_rate = MatmulPeakFlops(hw, shape.type) / hw.sm_count * hw.gemm_peak_fraction;
  bool first = true;
  for (const GemmTile& tile : kGemmTiles) {
    for (int split = 1; split <= kMaxSplitK; ++split) {
      if (split > 1 && k_blocks < split * kMinKBlocksPerSplit) break;
      if (split > 1) {
        // A bound below every split of at least this factor (it grows with the split): all
        // FLOPs at the MMA rate on every SM or the partials' stores, whichever is longer,
        // the reduction's reads of them, and two latencies.
        const double partials = outputs * kPartialBytes * split / hw.hbm_bandwidth;
        double bound = hw.kernel_launch_overhead_s + 2 * hw.gemm_wave_latency_s +
                       std::max(flops / (mma_rate * sms), partials) + partials;
        if (bound >= best.time_s) break;
      }
      double t = GemmCandidateTime(hw, shape, sms, tile, split);
      if (first || t < best.time_s) {
        first = false;
        best.tile = tile;
        best.split_k = split;
        best.ctas = shape.batch * std::ceil(static_cast<double>(shape.m) / tile.m) *
                    std::ceil(static_cast<double>(shape.n) / tile.n) * split;
        best.waves = std::ceil(best.ctas / sms);
        best.time_s = t;
      }
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<GemmPlan> PlanGemm(const HardwareSpec& hw, const GemmShape& shape, int sms) {
  if (sms < 1 || sms > hw.sm_count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a GEMM on %d SMs: %s has 1 to %d", sms, hw.name, hw.sm_count));
  }
  if (shape.m < 0 || shape.n < 0 || shape.k < 0 || !(shape.batch >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a GEMM of negative shape: batch %g, %d x %d x %d", shape.batch, shape.m, shape.n,
        shape.k));
  }
  if (shape.batch == 0 || shape.m == 0 || shape.n == 0) return GemmPlan{};  // no kernel
  thread_local absl::flat_hash_map<PlanKey, GemmPlan> cache;
  PlanKey key = KeyOf(hw, shape, sms);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  GemmPlan plan = SearchPlan(hw, shape, sms);
  if (cache.size() >= kMaxCachedPlans) cache.clear();
  cache.emplace(key, plan);
  return plan;
}

absl::StatusOr<double> GemmTime(const HardwareSpec& hw, const GemmShape& shape) {
  absl::StatusOr<GemmPlan> plan = PlanGemm(hw, shape, hw.sm_count);
  if (!plan.ok()) return plan.status();
  return plan->time_s;
}

}  // namespace commir::sim
