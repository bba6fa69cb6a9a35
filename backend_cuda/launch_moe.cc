// Launchers of moe_dispatch and moe_collect (kernels/moe.h): the routing's slots into a
// scratch buffer on the op's stream, then the row copies.
#include "absl/status/status.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/kernels/moe.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using runtime::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

// The slots of the routing (operand 1, [tokens, k]) for a buffer of `experts` x
// `capacity`, in a scratch buffer freed in stream order after the copies that read it.
absl::StatusOr<Tensor> Slots(const LaunchContext& ctx, k::MoeShape& shape) {
  const Tensor& experts_of = ctx.operand(1);
  shape.tokens = experts_of.dim(0);
  shape.k = experts_of.dim(1);
  absl::StatusOr<Tensor> slots = ctx.allocate(ElementType::kI64, {shape.tokens * shape.k});
  if (!slots.ok()) return slots.status();
  int64_t* data =
      static_cast<int64_t*>(static_cast<DeviceBuffer*>(slots->device_storage())->data());
  if (absl::Status s = ctx.Check(k::LaunchMoeSlots(experts_of.element_type(), ctx.in[1], shape,
                                                   data, ctx.error_flag, ctx.stream));
      !s.ok()) {
    return s;
  }
  return slots;
}

const int64_t* SlotData(const Tensor& slots) {
  return static_cast<const int64_t*>(
      static_cast<const DeviceBuffer*>(slots.device_storage())->data());
}

Results LaunchMoeDispatch(const LaunchContext& ctx) {
  const std::vector<int64_t>& buffer = ctx.op.result(0)->type().dims();
  const Tensor& rows = ctx.operand(0);
  const int64_t groups = ctx.op.attrs().GetInt("groups", 1);
  k::MoeShape shape{
      .experts = buffer[0], .capacity = buffer[1] / groups, .hidden = buffer[2], .groups = groups};
  absl::StatusOr<Tensor> slots = Slots(ctx, shape);
  if (!slots.ok()) return slots.status();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchMoeDispatch(rows.element_type(), ctx.in[0], rows.rank() == 3, shape,
                                          SlotData(*slots), out[0], ctx.stream));
  });
}

Results LaunchMoeCollect(const LaunchContext& ctx) {
  const Tensor& buffer = ctx.operand(0);
  const int64_t groups = ctx.op.attrs().GetInt("groups", 1);
  k::MoeShape shape{.experts = buffer.dim(0),
                    .capacity = buffer.dim(1) / groups,
                    .hidden = buffer.dim(2),
                    .groups = groups};
  absl::StatusOr<Tensor> slots = Slots(ctx, shape);
  if (!slots.ok()) return slots.status();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchMoeCollect(buffer.element_type(), ctx.in[0], shape, SlotData(*slots),
                                         out[0], ctx.stream));
  });
}

}  // namespace

void RegisterMoeLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kMoeDispatch, LaunchMoeDispatch);
  table.Register(OpKind::kMoeCollect, LaunchMoeCollect);
}

}  // namespace commir::cuda
