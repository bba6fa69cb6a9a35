#include "backend_cuda/launch_context.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/cuda_status.h"

namespace commir::cuda {

namespace k = ::commir::cuda_kernels;


absl::Status KernelLaunchStatus(cudaError_t error, const Operation& op) {
  if (error == cudaErrorInvalidValue) {
    return absl::UnimplementedError(absl::StrFormat(
        "the cuda kernels do not support '%s' on these operands (cudaErrorInvalidValue)",
        op.name()));
  }
  return CudaStatus(error, absl::StrCat("launching '", op.name(), "'"));
}

absl::StatusOr<std::vector<runtime::Tensor>> LaunchContext::AllocateAndLaunch(
    absl::FunctionRef<absl::Status(absl::Span<void* const> out)> launch) const {
  std::vector<runtime::Tensor> results;
  std::vector<void*> out;
  for (int i = 0; i < op.num_results(); ++i) {
    const Type type = op.result(i)->type();
    absl::StatusOr<runtime::Tensor> result = allocate(type.element_type(), type.dims());
    if (!result.ok()) return result.status();
    out.push_back(static_cast<DeviceBuffer*>(result->device_storage())->data());
    results.push_back(*std::move(result));
  }
  if (absl::Status s = launch(out); !s.ok()) return s;
  return results;
}

}  // namespace commir::cuda
