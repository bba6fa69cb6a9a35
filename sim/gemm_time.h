// Time of one GEMM kernel by shape, the way a cuBLASLt-style heuristic picks its kernel:
// every candidate CTA tile (kGemmTiles) and split-K factor (1..kMaxSplitK) is priced and
// the fastest wins. A candidate with tile TM x TN and split s on P SMs runs
//
//   ctas   = batch x ceil(M / TM) x ceil(N / TN) x s,   waves = ceil(ctas / P)
//   k_cta  = ceil(K / s) rounded up to whole k-blocks (128 bytes of the element type)
//   rate   = min(peak / sm_count x gemm_peak_fraction,                  MMA issue rate
//                gemm_operand_bandwidth / sm_count x 2 TM TN / ((TM + TN) x elem))
//            per SM: a small tile needs more operand bytes per FLOP than the L2 can feed
//   main   = waves x 2 TM TN k_cta / rate  +  last wave's epilogue (its tiles' stores)
//   time   = launch + waves x gemm_wave_latency
//            + max(main, (A + B + written C) bytes / HBM)            the memory roofline
//            [+ gemm_wave_latency + (partials + C) / HBM   with split-K: the reduction]
//
// Epilogues of earlier waves overlap the next wave's main loop; the last one cannot.
// Split-K writes f32 partials (s of them per output) that a reduction reads back. The
// per-SM peak is the whole GPU's over its sm_count, so pricing on fewer SMs (a GEMM beside
// an NCCL kernel that holds some) keeps each SM's speed and loses parallelism. HBM
// bandwidth is the hardware's whole figure whatever the SM count (pass a HardwareSpec with
// less to model a shared memory system). Each parameter's source: sim/hardware.cc and
// benchmarks/sim_calibration.md; the fit to XLA's measured H100 table: gemm_time_test.cc.
#ifndef COMMIR_SIM_GEMM_TIME_H_
#define COMMIR_SIM_GEMM_TIME_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/element_type.h"
#include "sim/hardware.h"

namespace commir::sim {

// The FLOP/s a matmul or attention of this element type runs at before any efficiency:
// bf16 and f16 on the bf16 tensor-core peak; f32 on tf32 if the hardware says
// f32_matmul_uses_tf32, else on plain f32; f64 and integers on plain f32 (a blind spot).
double MatmulPeakFlops(const HardwareSpec& hw, ElementType type);

// One GEMM launch: `batch` independent M x N x K products.
struct GemmShape {
  double batch = 1;
  int64_t m = 0, n = 0, k = 0;
  ElementType type = ElementType::kBF16;  // operands (the tensor-core peak and k-block)
  double operand_bytes = 0;               // A and B together, as read from HBM
  double result_element_bytes = 2;        // bytes of one C element
};

struct GemmTile {
  int64_t m, n;
};

// CTA tiles of Hopper cuBLASLt/CUTLASS bf16 kernels (warp-specialized, one CTA per SM).
inline constexpr GemmTile kGemmTiles[] = {{128, 256}, {256, 128}, {128, 128}, {64, 256},
                                          {128, 64},  {64, 128},  {64, 64}};
inline constexpr int kMaxSplitK = 16;
// A split-K slice keeps at least this many k-blocks (the main loop's double buffer).
inline constexpr int64_t kMinKBlocksPerSplit = 2;

// The kernel the heuristic picks and what it costs.
struct GemmPlan {
  GemmTile tile{0, 0};
  int split_k = 1;
  double ctas = 0;
  double waves = 0;
  double time_s = 0;  // launch overhead included
};

// The fastest candidate on `sms` SMs (1 <= sms <= hw.sm_count, else InvalidArgument).
// An empty GEMM (batch, M or N zero) launches nothing: time 0.
absl::StatusOr<GemmPlan> PlanGemm(const HardwareSpec& hw, const GemmShape& shape, int sms);

// One candidate's time (the formula above); PlanGemm takes the minimum of these.
double GemmCandidateTime(const HardwareSpec& hw, const GemmShape& shape, int sms,
                         GemmTile tile, int split_k);

// PlanGemm's time on all of the hardware's SMs.
absl::StatusOr<double> GemmTime(const HardwareSpec& hw, const GemmShape& shape);

}  // namespace commir::sim

#endif  // COMMIR_SIM_GEMM_TIME_H_
