#include "backend_cuda/cuda_status.h"

#include "absl/strings/str_format.h"

namespace commir::cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  switch (error) {
    case cudaErrorNoDevice:
      return absl::UnavailableError(absl::StrFormat(
          "%s: no CUDA-capable GPU is visible (cudaErrorNoDevice); check the driver, "
          "nvidia-smi and CUDA_VISIBLE_DEVICES",
          what));
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(absl::StrFormat(
          "%s: the NVIDIA driver is missing or older than this build's CUDA %d.%d runtime "
          "needs (cudaErrorInsufficientDriver); update the driver",
          what, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10));
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: out of GPU memory (%s)", what, cudaGetErrorString(error)));
    default:
      return absl::InternalError(absl::StrFormat("%s: CUDA error %s (%s)", what,
                                                 cudaGetErrorName(error),
                                                 cudaGetErrorString(error)));
  }
}

cudaError_t QueryEvent(cudaEvent_t event) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaErrorNotReady) cudaGetLastError();
  return state;
}

absl::Status OutOfMemory(int gpu, size_t bytes, size_t cached_bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t info = cudaMemGetInfo(&free_bytes, &total_bytes);
  constexpr double kMiB = 1024.0 * 1024.0;
  if (info != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory on GPU %d: cannot allocate %.1f MiB (%d bytes)", gpu, bytes / kMiB, bytes));
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "out of memory on GPU %d: cannot allocate %.1f MiB (%d bytes); the GPU has %.1f MiB "
      "free of %.1f MiB total, %.1f MiB of it cached by commir-run after releasing what it "
      "could",
      gpu, bytes / kMiB, bytes, free_bytes / kMiB, total_bytes / kMiB, cached_bytes / kMiB));
}

}  // namespace commir::cuda
