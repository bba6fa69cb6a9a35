// CUDA and NCCL results as absl::Status for the collective engine. Every message names the
// failed call and carries the library's error string (and, for NCCL, ncclGetLastError), so
// that commir-run can print it as is when it exits with status 3.
#ifndef COMMIR_BACKEND_CUDA_COMM_COMM_STATUS_H_
#define COMMIR_BACKEND_CUDA_COMM_COMM_STATUS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace commir::cuda::comm {

// cudaErrorNoDevice / InsufficientDriver -> Unavailable, cudaErrorMemoryAllocation ->
// ResourceExhausted, others -> Internal.
absl::Status CommCudaStatus(cudaError_t error, absl::string_view what);

// ncclSuccess -> OK. ncclInProgress is not an error for nonblocking communicators and must
// be handled by the caller before this is called. Invalid argument/usage -> Internal (a
// bug of ours), everything else (system, remote, CUDA failures) -> Unavailable. `comm`
// may be null.
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what);

}  // namespace commir::cuda::comm

#define COMMIR_COMM_CUDA(expr, what)                                      \
  do {                                                                    \
    cudaError_t commir_comm_error_ = (expr);                              \
    if (commir_comm_error_ != cudaSuccess) {                              \
      return ::commir::cuda::comm::CommCudaStatus(commir_comm_error_, (what)); \
    }                                                                     \
  } while (false)

#define COMMIR_COMM_RETURN_IF_ERROR(expr)            \
  do {                                               \
    ::absl::Status commir_comm_status_ = (expr);     \
    if (!commir_comm_status_.ok()) return commir_comm_status_; \
  } while (false)

#endif  // COMMIR_BACKEND_CUDA_COMM_COMM_STATUS_H_
