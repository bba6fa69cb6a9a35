// What the cuda backend's tensor-op launchers (launchers.h) work with: one op's operands
// on the device, its stream, and the one helper that allocates the op's results and
// launches the work that fills them.
#ifndef COMMIR_BACKEND_CUDA_LAUNCH_CONTEXT_H_
#define COMMIR_BACKEND_CUDA_LAUNCH_CONTEXT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backend_cuda/cublaslt_gemm.h"
#include "backend_cuda/kernels/dtype.h"
#include "commir/ir.h"
#include "commir/op_kernel_table.h"
#include "runtime/tensor.h"

namespace commir::cuda {

// A device buffer of `type` and `shape` on the op's device, ordered on its stream.
using DeviceAllocator =
    std::function<absl::StatusOr<runtime::Tensor>(ElementType type, std::vector<int64_t> shape)>;

// A kernel's launch error as a Status: cudaErrorInvalidValue, the kernels' answer to a
// combination they do not support, is Unimplemented naming the op.
absl::Status KernelLaunchStatus(cudaError_t error, const Operation& op);

struct LaunchContext {
  const Operation& op;
  absl::Span<const runtime::Tensor* const> operands;
  // operands[i]'s device pointer; the stream already waits for its producer.
  std::vector<const void*> in;
  absl::Span<const int64_t> indices;  // the index operands' values
  cudaStream_t stream = nullptr;
  int32_t* error_flag = nullptr;  // the GPU's data-dependent error bits
  CublasLtGemm* gemm = nullptr;   // the GPU's GEMM runner
  DeviceAllocator allocate;
  // Operand 0 handed over by the interpreter (runtime::OpContext::donated): a launcher may
  // write into its buffer and return it as its result. Null otherwise.
  runtime::Tensor* donated = nullptr;

  const runtime::Tensor& operand(int i) const { return *operands[i]; }

  // KernelLaunchStatus for this op.
  absl::Status Check(cudaError_t error) const { return KernelLaunchStatus(error, op); }

  // Allocates the op's results as its verified result types say (element type and
  // per-device dims: the interpreter's values have those types), then runs `launch` with
  // their device pointers. Returns the results, or the first error.
  absl::StatusOr<std::vector<runtime::Tensor>> AllocateAndLaunch(
      absl::FunctionRef<absl::Status(absl::Span<void* const> out)> launch) const;
};

// Runs one tensor op: validates what the kernels cannot, then allocates and launches.
using TensorLauncher = absl::StatusOr<std::vector<runtime::Tensor>> (*)(const LaunchContext& ctx);
using TensorLauncherTable = OpKernelTable<TensorLauncher>;



// A dimension counted from the end (-1 is the last) as a position from the front.
inline int64_t NormalizeDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_LAUNCH_CONTEXT_H_
