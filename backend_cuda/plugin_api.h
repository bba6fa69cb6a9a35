// The boundary between commir-run and the cuda backend, which is built as a shared
// object (libcommir_cuda.so) and loaded with dlopen only when --backend=cuda is chosen:
// the cpu path then never loads cudart, cuBLASLt or NCCL (hundreds of megabytes, most
// of a cpu run's start-up time). Plain C++ without CUDA, so commir-run can include it.
//
// Both sides are built together, by the same compiler, from this header: the C++ types
// below cross the boundary as they are. kPluginAbiVersion guards against a stale .so.
#ifndef COMMIR_BACKEND_CUDA_PLUGIN_API_H_
#define COMMIR_BACKEND_CUDA_PLUGIN_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::cuda {

// Bump whenever anything in this header changes.
inline constexpr int kPluginAbiVersion = 2;
// The shared object's file name, looked for beside commir-run (tools/cuda_plugin_loader.h).
inline constexpr char kPluginFileName[] = "libcommir_cuda.so";
// Its one exported entry point, of type PluginFactory.
inline constexpr char kPluginFactorySymbol[] = "CommirCreateCudaBackend";

// What commir-run decides; the plugin adds the launch mode from the environment.
struct PluginOptions {
  std::vector<int64_t> mesh_shape = {1};
  absl::Duration timeout = absl::ZeroDuration();  // zero: wait forever
  bool allow_tf32 = false;
  std::string rendezvous_file;  // COMMIR_RENDEZVOUS_FILE; empty: none
  bool p2p_nccl = false;         // --p2p=nccl (default ce: copy engines inside a node)
  int nccl_min_ctas = 0;         // --nccl-ctas; 0: NCCL's choice
  int nccl_max_ctas = 0;
};

// A started cuda backend, as commir-run uses it.
class CudaBackendPlugin {
 public:
  virtual ~CudaBackendPlugin() = default;
  virtual runtime::Backend* backend() = 0;
  // The mesh devices this process drives, ascending.
  virtual std::vector<int64_t> local_devices() const = 0;
  // Processes in the launch, and this one's rank.
  virtual int world_size() const = 0;
  virtual int rank() const = 0;
  // Every device's part of one result from this process's parts (multi-process runs).
  virtual absl::StatusOr<std::vector<runtime::Tensor>> GatherParts(
      absl::Span<const runtime::Tensor* const> local_parts) = 0;
};

// The entry point. Sets `result` to the backend, or to an error whose message reads after
// "error: " (e.g. "the cuda backend cannot start: no CUDA-capable GPU is visible").
// A plugin built for another abi_version sets an error saying so.
using PluginFactory = void (*)(int abi_version, const PluginOptions& options,
                               absl::StatusOr<std::unique_ptr<CudaBackendPlugin>>& result);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_PLUGIN_API_H_
