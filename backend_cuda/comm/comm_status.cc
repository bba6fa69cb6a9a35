#include "backend_cuda/comm/comm_status.h"

#include <string>

#include "absl/strings/str_format.h"

namespace commir::cuda::comm {

absl::Status CommCudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrFormat("%s failed: %s (%s)", what, cudaGetErrorString(error),
                                        cudaGetErrorName(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  std::string message = absl::StrFormat("NCCL: %s failed: %s%s%s", what, ncclGetErrorString(result),
                                        (last != nullptr && *last != '\0') ? ": " : "",
                                        last != nullptr ? last : "");
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InternalError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace commir::cuda::comm
