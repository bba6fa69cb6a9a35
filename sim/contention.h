// What a compute kernel has left of its GPU while communication runs beside it (the
// timeline's contention model, sim_backend.h). An NCCL kernel keeps `sms` SMs busy for
// its whole run (one CTA per channel), so a GEMM beside it schedules its tiles on the
// others: ceil(tiles / (SMs - S)) waves instead of ceil(tiles / SMs), each as long as
// before (gemm_time.h; the heuristic may then pick another tile). Every transfer, copy
// engines included, also takes HBM bandwidth for the bytes it reads and writes, which a
// memory-bound kernel misses, and a compute-bound GEMM only in its last wave's epilogue.
#ifndef COMMIR_SIM_CONTENTION_H_
#define COMMIR_SIM_CONTENTION_H_

#include "sim/collective_time.h"
#include "sim/hardware.h"

namespace commir::sim {

// The HBM share a kernel keeps whatever the communication beside it asks for: a guard
// for hand-written descriptions whose links outrun their HBM (no built-in comes near).
inline constexpr double kMinHbmShare = 0.05;

// `hw` as a kernel sees it beside `load`: sm_count - S SMs (S at most sm_count - 1), the
// FLOP/s peaks and gemm_operand_bandwidth scaled by (sm_count - S) / sm_count (a wave on
// the SMs left takes as long as a full one: each SM holds 1 / sm_count of the peak and
// of the L2's feed), and HBM bandwidth less the load's (at least kMinHbmShare of it).
// OpTime on the result is the kernel's time beside the load.
HardwareSpec HardwareBeside(const HardwareSpec& hw, const CommunicationLoad& load);

}  // namespace commir::sim

#endif  // COMMIR_SIM_CONTENTION_H_
