// Launchers of gather and scatter_add (kernels/gather.h).
#include "absl/strings/str_format.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/kernels/gather.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using runtime::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

// The table (or base) as [outer, rows, inner] around the verified op's axis.
absl::StatusOr<k::RowsShape> RowsOf(const LaunchContext& ctx) {
  const Tensor& table = ctx.operand(0);
  const Tensor& indices = ctx.operand(1);
  const int64_t axis = NormalizeDim(ctx.op.RequiredIntAttr("axis"), table.rank());
  if (axis < 0 || axis >= table.rank()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("axis %d is out of range for %s", axis, table.DebugTypeString()));
  }
  k::RowsShape shape;
  for (int64_t d = 0; d < axis; ++d) shape.outer *= table.dim(d);
  shape.rows = table.dim(axis);
  for (int64_t d = axis + 1; d < table.rank(); ++d) shape.inner *= table.dim(d);
  shape.count = indices.num_elements();
  return shape;
}

Results LaunchGather(const LaunchContext& ctx) {
  absl::StatusOr<k::RowsShape> shape = RowsOf(ctx);
  if (!shape.ok()) return shape.status();
  // An offset (index operand) marks one device's share of a split table.
  const bool masked = !ctx.indices.empty();
  const int64_t offset = masked ? ctx.indices[0] : 0;
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchGather(ctx.operand(0).element_type(), ctx.in[0], *shape,
                                     ctx.operand(1).element_type(), ctx.in[1], offset, masked,
                                     out[0], ctx.error_flag, ctx.stream));
  });
}

Results LaunchScatterAdd(const LaunchContext& ctx) {
  absl::StatusOr<k::RowsShape> shape = RowsOf(ctx);
  if (!shape.ok()) return shape.status();
  const Tensor& base = ctx.operand(0);
  const bool masked = !ctx.indices.empty();
  const int64_t offset = masked ? ctx.indices[0] : 0;
  const ElementType compute = k::ScatterAddComputeType(base.element_type());
  // f16, bf16, i32 and i1 sum in a wider buffer, rounded into the result once.
  Tensor wide;
  if (compute != base.element_type()) {
    absl::StatusOr<Tensor> allocated = ctx.allocate(compute, base.shape());
    if (!allocated.ok()) return allocated.status();
    wide = *std::move(allocated);
  }
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    void* acc = wide.on_device() ? static_cast<DeviceBuffer*>(wide.device_storage())->data()
                                 : out[0];
    return ctx.Check(k::LaunchScatterAdd(base.element_type(), ctx.in[0], *shape,
                                         ctx.operand(1).element_type(), ctx.in[1], offset,
                                         masked, ctx.in[2], acc, out[0], ctx.error_flag,
                                         ctx.stream));
  });
}

}  // namespace

void RegisterGatherLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kGather, LaunchGather);
  table.Register(OpKind::kScatterAdd, LaunchScatterAdd);
}

}  // namespace commir::cuda
