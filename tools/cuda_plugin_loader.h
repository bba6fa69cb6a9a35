// Loads the cuda backend (libcommir_cuda.so, backend_cuda/plugin_api.h) at run time, so
// that commir-run links no CUDA library and a cpu run never loads one.
#ifndef COMMIR_TOOLS_CUDA_PLUGIN_LOADER_H_
#define COMMIR_TOOLS_CUDA_PLUGIN_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend_cuda/plugin_api.h"

namespace commir {

// Where libcommir_cuda.so is looked for, in order: $COMMIR_CUDA_PLUGIN (a path to the
// file itself) when set, otherwise beside the running executable (/proc/self/exe, links
// resolved: bazel-bin/, or bin/ of the GPU bundle) and in its Bazel runfiles tree.
std::vector<std::string> CudaPluginCandidates();

// dlopens the first candidate that exists and starts the backend through its factory.
// Errors read after "error: ": a missing file or a failing dlopen/dlsym names the file
// and dlerror(); a backend that cannot start says why (no GPU, no driver, ...).
absl::StatusOr<std::unique_ptr<cuda::CudaBackendPlugin>> LoadCudaBackend(
    const cuda::PluginOptions& options);

}  // namespace commir

#endif  // COMMIR_TOOLS_CUDA_PLUGIN_LOADER_H_
