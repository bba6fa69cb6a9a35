// Launchers of the layout family (reshape, reshard, transpose, slice, concat, broadcast)
// and of the dynamic slices.
#include <span>

#include "absl/strings/str_format.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/cuda_status.h"
#include "backend_cuda/kernels/layout.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using runtime::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

// Reshape and reshard: row-major data does not move, so the result shares the operand's
// buffer (values are immutable; dynamic_update_slice writes into a copy).
Results LaunchView(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  std::vector<int64_t> shape =
      ctx.op.Is(OpKind::kReshape) ? ctx.op.result(0)->type().dims() : x.shape();
  if (runtime::NumElements(shape) != x.num_elements()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "reshape of %s to %d elements", x.DebugTypeString(), runtime::NumElements(shape)));
  }
  if (!x.on_device()) {
    // A literal reshaped: materialise it.
    return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
      return CudaStatus(cudaMemcpyAsync(out[0], ctx.in[0], x.byte_size(),
                                        cudaMemcpyDeviceToDevice, ctx.stream),
                        "cudaMemcpyAsync");
    });
  }
  std::vector<Tensor> results;
  results.push_back(Tensor::OnDevice(x.element_type(), std::move(shape), x.shared_storage()));
  return results;
}

Results LaunchTranspose(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const std::vector<int64_t> perm = ctx.op.RequiredIntListAttr("perm");
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(
        k::LaunchTranspose(x.element_type(), ctx.in[0], x.shape(), perm, out[0], ctx.stream));
  });
}

Results LaunchSlice(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const std::vector<int64_t> start = ctx.op.RequiredIntListAttr("start");
  const std::vector<int64_t> size = ctx.op.RequiredIntListAttr("size");
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchSlice(x.element_type(), ctx.in[0], x.shape(), start, size,
                                    out[0], ctx.stream));
  });
}

Results LaunchConcat(const LaunchContext& ctx) {
  const Type result = ctx.op.result(0)->type();
  std::vector<std::span<const int64_t>> shapes;
  for (const Tensor* part : ctx.operands) {
    shapes.emplace_back(part->shape().data(), part->shape().size());
  }
  const int64_t dim = NormalizeDim(ctx.op.RequiredIntAttr("dim"), result.rank());
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchConcat(result.element_type(), ctx.in, shapes, dim, out[0],
                                     ctx.stream));
  });
}

Results LaunchBroadcast(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const Type result = ctx.op.result(0)->type();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchBroadcast(x.element_type(), ctx.in[0], x.shape(), out[0],
                                        result.dims(), ctx.stream));
  });
}

Results LaunchDynamicSlice(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const int64_t dim = NormalizeDim(ctx.op.RequiredIntAttr("dim"), x.rank());
  const int64_t size = ctx.op.RequiredIntAttr("size");
  const int64_t offset = ctx.indices[0];
  if (dim < 0 || dim >= x.rank() || offset < 0 || size < 0 || offset > x.dim(dim) - size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dynamic_slice of %d elements at offset %d is out of range for dimension %d of %s",
        size, offset, dim, x.DebugTypeString()));
  }
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchDynamicSlice(x.element_type(), ctx.in[0], x.shape(), dim,
                                           offset, size, out[0], ctx.stream));
  });
}

Results LaunchDynamicUpdateSlice(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const Tensor& update = ctx.operand(1);
  const int64_t dim = NormalizeDim(ctx.op.RequiredIntAttr("dim"), x.rank());
  const int64_t offset = ctx.indices[0];
  if (dim < 0 || dim >= x.rank() || update.rank() != x.rank() || offset < 0 ||
      offset > x.dim(dim) - update.dim(dim)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dynamic_update_slice of %s at offset %d is out of range for dimension %d of %s",
        update.DebugTypeString(), offset, dim, x.DebugTypeString()));
  }
  // A destination nothing else holds is written where it is: no copy of the whole
  // accumulator (the ring schedules' every step). The stream already waited for x's
  // producer; its other readers are all earlier ops (this is its last use), which may
  // still run on other streams.
  if (ctx.donated != nullptr && ctx.donated->on_device()) {
    auto* buffer = static_cast<DeviceBuffer*>(ctx.donated->device_storage());
    if (absl::Status s = buffer->WaitForUsers(ctx.stream); !s.ok()) return s;
    if (absl::Status s = ctx.Check(k::LaunchDynamicUpdateSliceInPlace(
            x.element_type(), buffer->data(), x.shape(), ctx.in[1], update.dim(dim), dim,
            offset, ctx.stream));
        !s.ok()) {
      return s;
    }
    std::vector<Tensor> results;
    results.push_back(std::move(*ctx.donated));
    return results;
  }
  // Otherwise a copy of x with the update written in.
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) -> absl::Status {
    if (x.byte_size() > 0) {
      COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out[0], ctx.in[0], x.byte_size(),
                                                  cudaMemcpyDeviceToDevice, ctx.stream),
                                  "copying the dynamic_update_slice operand");
    }
    return ctx.Check(k::LaunchDynamicUpdateSliceInPlace(x.element_type(), out[0], x.shape(),
                                                        ctx.in[1], update.dim(dim), dim, offset,
                                                        ctx.stream));
  });
}

}  // namespace

void RegisterLayoutLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kReshape, LaunchView);
  table.Register(OpKind::kReshard, LaunchView);
  table.Register(OpKind::kTranspose, LaunchTranspose);
  table.Register(OpKind::kSlice, LaunchSlice);
  table.Register(OpKind::kConcat, LaunchConcat);
  table.Register(OpKind::kBroadcast, LaunchBroadcast);
  table.Register(OpKind::kDynamicSlice, LaunchDynamicSlice);
  table.Register(OpKind::kDynamicUpdateSlice, LaunchDynamicUpdateSlice);
}

}  // namespace commir::cuda
