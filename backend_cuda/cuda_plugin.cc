// The entry point of libcommir_cuda.so (backend_cuda/plugin_api.h): starts a CudaBackend
// in the launch mode the environment implies (backend_cuda/comm/launch.h).
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backend_cuda/comm/launch.h"
#include "backend_cuda/cuda_backend.h"
#include "backend_cuda/plugin_api.h"

namespace commir::cuda {
namespace {

class CudaBackendPluginImpl : public CudaBackendPlugin {
 public:
  explicit CudaBackendPluginImpl(std::unique_ptr<CudaBackend> backend)
      : backend_(std::move(backend)) {}
  runtime::Backend* backend() override { return backend_.get(); }
  std::vector<int64_t> local_devices() const override { return backend_->local_devices(); }
  int world_size() const override { return backend_->plan().world_size; }
  int rank() const override { return backend_->plan().rank; }
  absl::StatusOr<std::vector<runtime::Tensor>> GatherParts(
      absl::Span<const runtime::Tensor* const> local_parts) override {
    return backend_->GatherParts(local_parts);
  }

 private:
  std::unique_ptr<CudaBackend> backend_;
};

absl::StatusOr<std::unique_ptr<CudaBackendPlugin>> Create(const PluginOptions& plugin_options) {
  absl::StatusOr<comm::LaunchInfo> launch = comm::DetectLaunch(comm::ProcessEnv());
  if (!launch.ok()) {
    return absl::Status(launch.status().code(),
                        absl::StrCat("cannot read the launch environment: ",
                                     launch.status().message()));
  }
  CudaBackendOptions options;
  options.launch = *launch;
  options.mesh_shape = plugin_options.mesh_shape;
  options.timeout = plugin_options.timeout;
  options.allow_tf32 = plugin_options.allow_tf32;
  options.p2p = plugin_options.p2p_nccl ? comm::P2pTransport::kNccl
                                        : comm::P2pTransport::kCopyEngine;
  options.nccl_min_ctas = plugin_options.nccl_min_ctas;
  options.nccl_max_ctas = plugin_options.nccl_max_ctas;
  if (!plugin_options.rendezvous_file.empty()) {
    options.rendezvous_file = plugin_options.rendezvous_file;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> created = CudaBackend::Create(std::move(options));
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("the cuda backend cannot start: ",
                                     created.status().message()));
  }
  return std::make_unique<CudaBackendPluginImpl>(*std::move(created));
}

}  // namespace
}  // namespace commir::cuda

// Checked against commir::cuda::PluginFactory below, so a signature change fails to build.
extern "C" __attribute__((visibility("default"))) void CommirCreateCudaBackend(
    int abi_version, const commir::cuda::PluginOptions& options,
    absl::StatusOr<std::unique_ptr<commir::cuda::CudaBackendPlugin>>& result) {
  if (abi_version != commir::cuda::kPluginAbiVersion) {
    result = absl::FailedPreconditionError(absl::StrCat(
        "the cuda backend library was built for plugin ABI ", commir::cuda::kPluginAbiVersion,
        ", commir-run expects ", abi_version, ": rebuild both together"));
    return;
  }
  result = commir::cuda::Create(options);
}

[[maybe_unused]] static constexpr commir::cuda::PluginFactory kFactoryHasTheDeclaredType =
    &CommirCreateCudaBackend;
