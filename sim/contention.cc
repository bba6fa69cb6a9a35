#include "sim/contention.h"

#include <algorithm>

namespace commir::sim {

HardwareSpec HardwareBeside(const HardwareSpec& hw, const CommunicationLoad& load) {
  HardwareSpec shared = hw;
  if (hw.sm_count > 1 && load.sms > 0) {
    const int taken = std::min(load.sms, hw.sm_count - 1);
    const double left = static_cast<double>(hw.sm_count - taken) / hw.sm_count;
    shared.sm_count = hw.sm_count - taken;
    shared.peak_flops_bf16 *= left;
    shared.peak_flops_tf32 *= left;
    shared.peak_flops_f32 *= left;
    // The L2's feed per SM stays what it was (sim/gemm_time.h divides it by sm_count).
    shared.gemm_operand_bandwidth *= left;
  }
  if (load.hbm_bytes_per_s > 0) {
    shared.hbm_bandwidth =
        std::max(hw.hbm_bandwidth - load.hbm_bytes_per_s, kMinHbmShare * hw.hbm_bandwidth);
  }
  return shared;
}

}  // namespace commir::sim
