// The cuda launcher of top_k.
#include "backend_cuda/kernels/topk.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;

absl::StatusOr<std::vector<runtime::Tensor>> LaunchTopK(const LaunchContext& ctx) {
  const runtime::Tensor& x = ctx.operand(0);
  const int64_t n = x.rank() == 0 ? 1 : x.shape().back();
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  const int64_t top = ctx.op.RequiredIntAttr("k");
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchTopK(x.element_type(), ctx.in[0], rows, n, top, out[0],
                                   static_cast<int64_t*>(out[1]), ctx.stream));
  });
}

}  // namespace

void RegisterTopKLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kTopK, LaunchTopK);
}

}  // namespace commir::cuda
