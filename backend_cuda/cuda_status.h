// CUDA errors as absl::Status, with the codes that commir-run turns into exit status 3
// (a backend or device failure): no device or driver -> Unavailable, out of memory ->
// ResourceExhausted, anything else -> Internal naming the call.
#ifndef COMMIR_BACKEND_CUDA_CUDA_STATUS_H_
#define COMMIR_BACKEND_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace commir::cuda {

// `what` names the failed call ("cudaMalloc", "launching softmax", ...).
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// cudaEventQuery without side effects on later error checks: the runtime records
// cudaErrorNotReady as the thread's last error, and every kernel launcher returns
// cudaGetLastError(), so a poll that found an event pending would make the next launch
// on this thread fail with "device not ready". Clears that (and only that) record.
cudaError_t QueryEvent(cudaEvent_t event);

// Out of memory on `gpu` while asking for `bytes`, with the device's free/total memory.
absl::Status OutOfMemory(int gpu, size_t bytes, size_t cached_bytes);

}  // namespace commir::cuda

#define COMMIR_CUDA_RETURN_IF_ERROR(expr, what)                         \
  do {                                                                  \
    cudaError_t commir_cuda_error_ = (expr);                            \
    if (commir_cuda_error_ != cudaSuccess) {                            \
      return ::commir::cuda::CudaStatus(commir_cuda_error_, (what));    \
    }                                                                   \
  } while (false)

#endif  // COMMIR_BACKEND_CUDA_CUDA_STATUS_H_
