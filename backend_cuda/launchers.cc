#include "backend_cuda/launchers.h"

namespace commir::cuda {

const TensorLauncherTable& CudaTensorLaunchers() {
  static const TensorLauncherTable* const table = [] {
    auto* built = new TensorLauncherTable;
    RegisterElementwiseLaunchers(*built);
    RegisterLinalgLaunchers(*built);
    RegisterLayoutLaunchers(*built);
    RegisterDropoutLaunchers(*built);
    RegisterGatherLaunchers(*built);
    RegisterLossLaunchers(*built);
    RegisterTopKLaunchers(*built);
    RegisterMoeLaunchers(*built);
    return built;
  }();
  return *table;
}

absl::Status CheckCudaTensorLaunchers(const TensorLauncherTable& table) {
  return table.CheckComplete("cuda", "tensor op", NeedsTensorKernel);
}

}  // namespace commir::cuda
