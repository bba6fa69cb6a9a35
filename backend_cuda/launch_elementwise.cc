// Launchers of the elementwise family: unary, binary (compare too) and ternary (select)
// functions, convert, full.
#include "backend_cuda/kernels/elementwise.h"
#include "backend_cuda/launchers.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using Results = absl::StatusOr<std::vector<runtime::Tensor>>;

ElementwiseFn FnOf(const Operation& op) { return op.def().elementwise_fn(op.attrs()); }

Results LaunchUnary(const LaunchContext& ctx) {
  const runtime::Tensor& x = ctx.operand(0);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchUnary(FnOf(ctx.op), x.element_type(), ctx.in[0], out[0],
                                    x.num_elements(), ctx.stream));
  });
}

Results LaunchBinary(const LaunchContext& ctx) {
  const runtime::Tensor& a = ctx.operand(0);
  const runtime::Tensor& b = ctx.operand(1);
  const Type result = ctx.op.result(0)->type();
  const ElementwiseFn fn = FnOf(ctx.op);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    if (ElementwiseFnIsPredicate(fn)) {
      return ctx.Check(k::LaunchCompare(fn, a.element_type(), ctx.in[0], a.shape(),
                                        ctx.in[1], b.shape(), out[0], result.dims(), ctx.stream));
    }
    return ctx.Check(k::LaunchBinary(fn, a.element_type(), ctx.in[0], a.shape(), ctx.in[1],
                                     b.shape(), out[0], result.dims(), ctx.error_flag,
                                     ctx.stream));
  });
}

Results LaunchTernary(const LaunchContext& ctx) {
  const runtime::Tensor& cond = ctx.operand(0);
  const runtime::Tensor& a = ctx.operand(1);
  const runtime::Tensor& b = ctx.operand(2);
  const Type result = ctx.op.result(0)->type();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchSelect(a.element_type(), ctx.in[0], cond.shape(), ctx.in[1],
                                     a.shape(), ctx.in[2], b.shape(), out[0], result.dims(),
                                     ctx.stream));
  });
}

Results LaunchConvert(const LaunchContext& ctx) {
  const runtime::Tensor& x = ctx.operand(0);
  const ElementType to = ctx.op.result(0)->type().element_type();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchConvert(x.element_type(), ctx.in[0], to, out[0],
                                      x.num_elements(), ctx.stream));
  });
}

Results LaunchFull(const LaunchContext& ctx) {
  const Type result = ctx.op.result(0)->type();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchFill(result.element_type(), out[0], result.num_elements(),
                                   ctx.op.RequiredNumberAttr("value"), ctx.stream));
  });
}

}  // namespace

void RegisterElementwiseLaunchers(TensorLauncherTable& table) {
  table.RegisterElementwise(LaunchUnary, LaunchBinary, LaunchTernary);
  table.Register(OpKind::kConvert, LaunchConvert);
  table.Register(OpKind::kFull, LaunchFull);
}

}  // namespace commir::cuda
