// The cuda backend's tensor-op launchers, one file per op family, and the table that
// dispatches to them by op kind.
#ifndef COMMIR_BACKEND_CUDA_LAUNCHERS_H_
#define COMMIR_BACKEND_CUDA_LAUNCHERS_H_

#include "absl/status/status.h"
#include "backend_cuda/launch_context.h"

namespace commir::cuda {

// Each family registers its launchers.
void RegisterElementwiseLaunchers(TensorLauncherTable& table);  // launch_elementwise.cc
void RegisterLinalgLaunchers(TensorLauncherTable& table);       // launch_linalg.cc
void RegisterLayoutLaunchers(TensorLauncherTable& table);       // launch_layout.cc
void RegisterDropoutLaunchers(TensorLauncherTable& table);      // launch_dropout.cc
void RegisterGatherLaunchers(TensorLauncherTable& table);       // launch_gather.cc
void RegisterLossLaunchers(TensorLauncherTable& table);         // launch_loss.cc
void RegisterTopKLaunchers(TensorLauncherTable& table);         // launch_topk.cc
void RegisterMoeLaunchers(TensorLauncherTable& table);          // launch_moe.cc

// Every family's launchers (built once).
const TensorLauncherTable& CudaTensorLaunchers();

// Ok when every op that needs a tensor kernel has a launcher; otherwise an error naming
// each op without one.
absl::Status CheckCudaTensorLaunchers(const TensorLauncherTable& table);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_LAUNCHERS_H_
