// NCCL's SM budget (ncclConfig_t minCTAs/maxCTAs, commir-run --nccl-ctas=N|MIN:MAX)
// applied to a hardware description, so that the sim's NCCL kernels keep the SMs the
// cuda backend's communicators are configured to take.
//
// NCCL does not pick a number inside [MIN, MAX]: it computes its own channel count from
// the topology (the hardware's nccl_*_sms: 32 ring and send/recv channels on an HGX
// H100, 16 NVLS channels) and clamps it into the bounds, one CTA (one SM) per channel:
//
//   channels = max(MIN, min(own, MAX))
//
// (NVIDIA/nccl src/graph/connect.cc: "Honor NCCL_MIN/MAX_CTAS", nChannels =
// max(minChannels, min(nChannels, maxChannels)); src/transport/nvls.cc: nvlsChannels =
// max(minCTAs, min(maxCTAs, NCCL_NVLS_NCHANNELS)); send/recv's p2p channels follow the
// ring's count). So MIN matters only above NCCL's own count and MAX only below it:
// --nccl-ctas=8:64 on an H100 leaves NCCL its 32; --nccl-ctas=8 pins 8.
// Not modelled: fewer channels also move fewer bytes per second at once (each channel
// is one ring); the collective's time here stays the hardware's.
#ifndef COMMIR_SIM_NCCL_CTAS_H_
#define COMMIR_SIM_NCCL_CTAS_H_

#include "absl/status/status.h"
#include "sim/hardware.h"

namespace commir::sim {

// NCCL's clamp of its own channel count `own` into [min_ctas, max_ctas].
int NcclChannels(int own, int min_ctas, int max_ctas);

// Applies the clamp to hw's nccl_collective_sms, nccl_p2p_sms and nccl_nvls_sms.
// InvalidArgument when 1 <= min_ctas <= max_ctas does not hold, or when a clamped count
// leaves a GEMM beside the kernel no SM (sm_count or more), naming the field.
absl::Status ApplyNcclCtas(HardwareSpec& hw, int min_ctas, int max_ctas);

}  // namespace commir::sim

#endif  // COMMIR_SIM_NCCL_CTAS_H_
