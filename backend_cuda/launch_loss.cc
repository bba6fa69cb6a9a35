// Launchers of cross_entropy and cross_entropy_grad.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/kernels/cross_entropy.h"
#include "backend_cuda/launchers.h"
#include "commir/cross_entropy_op.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using runtime::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

absl::StatusOr<k::KCrossEntropyArgs> ArgsOf(const LaunchContext& ctx) {
  const Tensor& logits = ctx.operand(kCeLogits);
  const Tensor& labels = ctx.operand(kCeLabels);
  if (logits.rank() < 1 || labels.num_elements() * logits.dim(logits.rank() - 1) !=
                               logits.num_elements()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the labels %s do not match the logits %s", ctx.op.name(), labels.DebugTypeString(),
        logits.DebugTypeString()));
  }
  const CrossEntropyOptions options = CrossEntropyOptionsOf(ctx.op);
  k::KCrossEntropyArgs args;
  args.dtype = logits.element_type();
  args.label_dtype = labels.element_type();
  args.logits = ctx.in[kCeLogits];
  args.labels = ctx.in[kCeLabels];
  args.classes = logits.dim(logits.rank() - 1);
  args.tokens = labels.num_elements();
  args.reduction = options.reduction == LossReduction::kMean  ? 0
                   : options.reduction == LossReduction::kSum ? 1
                                                              : 2;
  args.ignore_index = options.ignore_index;
  args.label_smoothing = options.label_smoothing;
  args.z_loss = options.z_loss;
  // An index operand (the offset) marks the vocabulary-parallel form.
  if (!ctx.indices.empty()) {
    args.offset = ctx.indices[0];
    args.vocab = options.classes;
    if (args.offset < 0 || args.vocab < args.classes || args.offset > args.vocab - args.classes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: classes [%d, %d) are not within the %d classes", ctx.op.name(), args.offset,
          args.offset + args.classes, args.vocab));
    }
    if (ctx.op.Is(OpKind::kCrossEntropy)) args.lse_in = ctx.in[kCeLse];
  }
  return args;
}

ElementType StatsType(ElementType logits) {
  return logits == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

Results LaunchCrossEntropy(const LaunchContext& ctx) {
  absl::StatusOr<k::KCrossEntropyArgs> args = ArgsOf(ctx);
  if (!args.ok()) return args.status();
  // The per-token losses before the reduction (statistics' type).
  absl::StatusOr<Tensor> token_losses =
      ctx.allocate(StatsType(args->dtype), {std::max<int64_t>(args->tokens, 1)});
  if (!token_losses.ok()) return token_losses.status();
  void* scratch = static_cast<DeviceBuffer*>(token_losses->device_storage())->data();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchCrossEntropy(*args, out[0], out[1], scratch, ctx.error_flag,
                                           ctx.stream));
  });
}

Results LaunchCrossEntropyGrad(const LaunchContext& ctx) {
  absl::StatusOr<k::KCrossEntropyArgs> args = ArgsOf(ctx);
  if (!args.ok()) return args.status();
  const Tensor& dloss = ctx.operand(kCeDloss);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchCrossEntropyGrad(*args, ctx.in[kCeLse], dloss.element_type(),
                                               ctx.in[kCeDloss], out[0], ctx.error_flag,
                                               ctx.stream));
  });
}

}  // namespace

void RegisterLossLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kCrossEntropy, LaunchCrossEntropy);
  table.Register(OpKind::kCrossEntropyGrad, LaunchCrossEntropyGrad);
}

}  // namespace commir::cuda
