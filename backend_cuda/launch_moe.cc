// moe_dispatch and moe_collect on the cuda backend: not implemented yet. The launchers
// refuse the op with an error that says so and where it runs, rather than leaving the
// table incomplete (which would stop the backend from starting for every program).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

absl::StatusOr<std::vector<runtime::Tensor>> RefuseMoe(const LaunchContext& ctx) {
  return absl::UnimplementedError(absl::StrCat(
      "the cuda backend has no kernel for '", ctx.op.name(),
      "' yet; run mixture-of-experts programs with --backend=cpu (or predict them with "
      "--backend=sim)"));
}

}  // namespace

void RegisterMoeLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kMoeDispatch, RefuseMoe);
  table.Register(OpKind::kMoeCollect, RefuseMoe);
}

}  // namespace commir::cuda
