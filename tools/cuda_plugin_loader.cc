#include "tools/cuda_plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir {

std::vector<std::string> CudaPluginCandidates() {
  if (const char* path = std::getenv("COMMIR_CUDA_PLUGIN"); path != nullptr && *path != '\0') {
    return {path};
  }
  std::vector<std::string> candidates;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / cuda::kPluginFileName).string());
    // `bazel run` and tests may start the binary from its runfiles tree.
    candidates.push_back(
        (exe.parent_path() / (exe.filename().string() + ".runfiles") / "commir" /
         cuda::kPluginFileName)
            .string());
  }
  if (const char* runfiles = std::getenv("RUNFILES_DIR"); runfiles != nullptr) {
    candidates.push_back(
        (std::filesystem::path(runfiles) / "commir" / cuda::kPluginFileName).string());
  }
  return candidates;
}

absl::StatusOr<std::unique_ptr<cuda::CudaBackendPlugin>> LoadCudaBackend(
    const cuda::PluginOptions& options) {
  const std::vector<std::string> candidates = CudaPluginCandidates();
  std::string path;
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) {
      path = candidate;
      break;
    }
  }
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "cannot load the cuda backend: ", cuda::kPluginFileName, " not found (looked for ",
        absl::StrJoin(candidates, ", "),
        "); it is built with commir-run when CUDA is found and must stay beside it"));
  }
  // Never closed: the backend's objects and code live until the process ends.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load the cuda backend ", path, ": ", dlerror()));
  }
  auto factory = reinterpret_cast<cuda::PluginFactory>(dlsym(handle, cuda::kPluginFactorySymbol));
  if (factory == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot load the cuda backend ", path, ": ",
                                               dlerror()));
  }
  absl::StatusOr<std::unique_ptr<cuda::CudaBackendPlugin>> result =
      absl::InternalError("the cuda backend's factory returned nothing");
  factory(cuda::kPluginAbiVersion, options, result);
  return result;
}

}  // namespace commir
