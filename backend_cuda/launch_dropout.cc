// The launcher of dropout: the block's global indexing from the op's offsets (its index
// operands) and global_shape, then one kernel, which reads the step (the op's second
// tensor operand, when given) from device memory itself.
#include "backend_cuda/kernels/dropout.h"
#include "backend_cuda/launchers.h"
#include "commir/dropout_indexing.h"

namespace commir::cuda {
namespace {

absl::StatusOr<std::vector<runtime::Tensor>> LaunchDropoutOp(const LaunchContext& ctx) {
  const runtime::Tensor& x = ctx.operand(0);
  const Attribute* global = ctx.op.attrs().Find("global_shape");
  absl::StatusOr<DropoutIndexing> indexing =
      DropoutIndexingOf(x.shape(), global != nullptr ? global->int_list() : std::nullopt,
                        ctx.indices, ctx.op.RequiredNumberAttr("rate"));
  if (!indexing.ok()) return indexing.status();
  const uint64_t seed = static_cast<uint64_t>(ctx.op.RequiredIntAttr("seed"));
  const bool has_step = ctx.operands.size() > 1;
  const void* step = has_step ? ctx.in[1] : nullptr;
  const ElementType step_type = has_step ? ctx.operand(1).element_type() : ElementType::kI64;
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(cuda_kernels::LaunchDropout(x.element_type(), ctx.in[0], out[0], x.shape(),
                                                 indexing->base, indexing->strides, seed,
                                                 indexing->threshold, indexing->scale,
                                                 ctx.stream, step, step_type));
  });
}

}  // namespace

void RegisterDropoutLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kDropout, LaunchDropoutOp);
}

}  // namespace commir::cuda
