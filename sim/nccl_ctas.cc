#include "sim/nccl_ctas.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace commir::sim {

int NcclChannels(int own, int min_ctas, int max_ctas) {
  return std::max(min_ctas, std::min(own, max_ctas));
}

absl::Status ApplyNcclCtas(HardwareSpec& hw, int min_ctas, int max_ctas) {
  if (min_ctas < 1 || min_ctas > max_ctas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NCCL's CTA bounds need 1 <= MIN <= MAX, got %d:%d", min_ctas, max_ctas));
  }
  HardwareSpec bounded = hw;
  for (auto& [name, sms] : {std::pair<const char*, int*>{"nccl_collective_sms",
                                                         &bounded.nccl_collective_sms},
                            {"nccl_p2p_sms", &bounded.nccl_p2p_sms},
                            {"nccl_nvls_sms", &bounded.nccl_nvls_sms}}) {
    *sms = NcclChannels(*sms, min_ctas, max_ctas);
    if (*sms >= hw.sm_count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d CTAs for %s leave no SM of %s's %d to the kernels beside NCCL's", *sms, name,
          hw.name, hw.sm_count));
    }
  }
  hw = std::move(bounded);
  return absl::OkStatus();
}

}  // namespace commir::sim
