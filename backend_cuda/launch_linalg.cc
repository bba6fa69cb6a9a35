// Launchers of matmul (cuBLASLt), reductions, softmax, the norms and attention.
#include <cmath>

#include "absl/strings/str_format.h"
#include "backend_cuda/gemm_batch.h"
#include "backend_cuda/kernels/attention.h"
#include "backend_cuda/kernels/attention_grad.h"
#include "backend_cuda/kernels/attention_merge.h"
#include "backend_cuda/kernels/elementwise.h"
#include "backend_cuda/kernels/reduce.h"
#include "backend_cuda/launchers.h"
#include "commir/attention_op.h"

namespace commir::cuda {
namespace {

namespace k = ::commir::cuda_kernels;
using runtime::Tensor;
using Results = absl::StatusOr<std::vector<Tensor>>;

const void* Offset(const void* base, int64_t bytes) {
  return static_cast<const char*>(base) + bytes;
}

// C = A B into `c` (of args.c_type), one strided batched product or one product per
// batch entry when a broadcast has no single stride.
absl::Status RunGemm(const LaunchContext& ctx, GemmArgs args, const BatchPlan& batches, void* c) {
  const int64_t a_matrix = args.m * args.k, b_matrix = args.k * args.n, c_matrix = args.m * args.n;
  if (batches.strided) {
    args.a = ctx.in[0];
    args.b = ctx.in[1];
    args.c = c;
    args.batch = batches.batch;
    args.stride_a = batches.a_stride_matrices * a_matrix;
    args.stride_b = batches.b_stride_matrices * b_matrix;
    args.stride_c = c_matrix;
    return ctx.gemm->Run(args, ctx.stream);
  }
  const int a_width = ElementTypeByteWidth(args.ab_type);
  const int c_width = ElementTypeByteWidth(args.c_type);
  for (int64_t i = 0; i < batches.batch; ++i) {
    GemmArgs entry = args;
    entry.a = Offset(ctx.in[0], batches.a_index[i] * a_matrix * a_width);
    entry.b = Offset(ctx.in[1], batches.b_index[i] * b_matrix * a_width);
    entry.c = static_cast<char*>(c) + i * c_matrix * c_width;
    if (absl::Status s = ctx.gemm->Run(entry, ctx.stream); !s.ok()) return s;
  }
  return absl::OkStatus();
}

Results LaunchMatMul(const LaunchContext& ctx) {
  const Tensor& a = ctx.operand(0);
  const Tensor& b = ctx.operand(1);
  const bool ta = ctx.op.BoolAttr("transpose_a");
  const bool tb = ctx.op.BoolAttr("transpose_b");
  const Type result = ctx.op.result(0)->type();
  const ElementType c_type = result.element_type();
  if (a.rank() < 2 || b.rank() < 2 || a.element_type() != b.element_type()) {
    return absl::InvalidArgumentError(absl::StrFormat("matmul of %s and %s", a.DebugTypeString(),
                                                      b.DebugTypeString()));
  }
  if (!IsFloatType(a.element_type()) || !IsFloatType(c_type)) {
    return absl::UnimplementedError(absl::StrFormat(
        "the cuda backend multiplies float matrices only (got %s -> %s)",
        ElementTypeName(a.element_type()), ElementTypeName(c_type)));
  }
  GemmArgs args;
  args.ab_type = a.element_type();
  args.m = a.dim(a.rank() - (ta ? 1 : 2));
  args.k = a.dim(a.rank() - (ta ? 2 : 1));
  args.n = b.dim(b.rank() - (tb ? 2 : 1));
  const int64_t b_k = b.dim(b.rank() - (tb ? 1 : 2));
  if (b_k != args.k) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "matmul: contraction sizes differ (%d and %d) for %s and %s", args.k, b_k,
        a.DebugTypeString(), b.DebugTypeString()));
  }
  args.transpose_a = ta;
  args.transpose_b = tb;
  absl::StatusOr<BatchPlan> batches =
      PlanBatches(absl::MakeConstSpan(a.shape()).subspan(0, a.rank() - 2),
                  absl::MakeConstSpan(b.shape()).subspan(0, b.rank() - 2));
  if (!batches.ok()) return batches.status();

  // Products cuBLASLt cannot write directly (e.g. f32 -> bf16, f16 -> f64) go through
  // an f32 (f64 for f64 operands) buffer and a conversion that rounds to nearest even.
  if (GemmSupportsDirectly(args.ab_type, c_type)) {
    args.c_type = c_type;
    return ctx.AllocateAndLaunch(
        [&](absl::Span<void* const> out) { return RunGemm(ctx, args, *batches, out[0]); });
  }
  args.c_type = args.ab_type == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  absl::StatusOr<Tensor> wide = ctx.allocate(args.c_type, result.dims());
  if (!wide.ok()) return wide.status();
  void* wide_ptr = static_cast<DeviceBuffer*>(wide->device_storage())->data();
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    if (absl::Status s = RunGemm(ctx, args, *batches, wide_ptr); !s.ok()) return s;
    return ctx.Check(k::LaunchConvert(args.c_type, wide_ptr, c_type, out[0],
                                      wide->num_elements(), ctx.stream));
  });
}

Results LaunchReduce(const LaunchContext& ctx) {
  const ReductionFn reduce = ctx.op.def().reduction_fn(ctx.op.attrs());
  const Tensor& x = ctx.operand(0);
  const std::vector<int64_t> dims = ctx.op.RequiredIntListAttr("dims");
  // keepdim only changes the shape: the bytes are the same.
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchReduce(reduce, x.element_type(), ctx.in[0], x.shape(), dims,
                                     out[0], ctx.error_flag, ctx.stream));
  });
}

Results LaunchSoftmax(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchSoftmax(x.element_type(), ctx.in[0], x.shape(),
                                      ctx.op.IntAttr("dim"), out[0], ctx.stream));
  });
}

// The norms normalise over the last dimension: rows of n elements.
struct Rows {
  int64_t rows = 0;
  int64_t n = 0;
};
Rows RowsOf(const Tensor& x) {
  const int64_t n = x.rank() == 0 ? 1 : x.shape().back();
  return {n == 0 ? 0 : x.num_elements() / n, n};
}

Results LaunchLayerNorm(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const Rows rows = RowsOf(x);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchLayerNorm(
        x.element_type(), ctx.in[0], rows.rows, rows.n, ctx.operand(1).element_type(),
        ctx.in[1], ctx.operand(2).element_type(), ctx.in[2], ctx.op.NumberAttr("eps"),
        out[0], ctx.stream));
  });
}

Results LaunchRmsNorm(const LaunchContext& ctx) {
  const Tensor& x = ctx.operand(0);
  const Rows rows = RowsOf(x);
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchRmsNorm(x.element_type(), ctx.in[0], rows.rows, rows.n,
                                      ctx.operand(1).element_type(), ctx.in[1],
                                      ctx.op.NumberAttr("eps"), out[0], ctx.stream));
  });
}

Results LaunchAttention(const LaunchContext& ctx) {
  const Tensor& q = ctx.operand(0);
  const Tensor& key = ctx.operand(1);
  const Tensor& v = ctx.operand(2);
  if (q.rank() != 4 || key.rank() != 4 || v.rank() != 4) {
    return absl::InvalidArgumentError("attention: q, k and v must be rank 4");
  }
  k::KAttentionArgs args;
  args.dtype = q.element_type();
  args.batch = q.dim(0);
  args.heads = q.dim(1);
  args.sq = q.dim(2);
  args.d = q.dim(3);
  args.kv_heads = key.dim(1);
  args.skv = key.dim(2);
  args.dv = v.dim(3);
  if (args.kv_heads == 0 || args.heads % args.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention: %d query heads are not a multiple of %d kv heads", args.heads,
        args.kv_heads));
  }
  args.causal = ctx.op.BoolAttr("causal");
  args.scale = AttentionOp(ctx.op).scale(args.d);
  args.q_pos = !ctx.indices.empty() ? ctx.indices[0] : args.skv - args.sq;
  args.k_pos = ctx.indices.size() > 1 ? ctx.indices[1] : 0;
  args.q = ctx.in[0];
  args.k = ctx.in[1];
  args.v = ctx.in[2];
  // Results: the output and, when the op has a second result, the f32 log-sum-exp.
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    args.out = out[0];
    if (out.size() == 2) args.lse = static_cast<float*>(out[1]);
    return ctx.Check(k::LaunchAttention(args, ctx.stream));
  });
}

Results LaunchAttentionGrad(const LaunchContext& ctx) {
  const AttentionGradOp view(ctx.op);
  const Tensor& q = ctx.operand(AttentionGradOp::kQ);
  const Tensor& key = ctx.operand(AttentionGradOp::kK);
  const Tensor& v = ctx.operand(AttentionGradOp::kV);
  if (q.rank() != 4 || key.rank() != 4 || v.rank() != 4) {
    return absl::InvalidArgumentError("attention_grad: q, k and v must be rank 4");
  }
  k::KAttentionGradArgs args;
  args.dtype = q.element_type();
  args.batch = q.dim(0);
  args.heads = q.dim(1);
  args.sq = q.dim(2);
  args.d = q.dim(3);
  args.kv_heads = key.dim(1);
  args.skv = key.dim(2);
  args.dv = v.dim(3);
  if (args.kv_heads == 0 ? args.heads != 0 : args.heads % args.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention_grad: %d query heads are not a multiple of %d kv heads", args.heads,
        args.kv_heads));
  }
  args.causal = view.causal();
  args.partial_keys = view.partial_keys();
  args.scale = view.scale(args.d);
  args.q_pos = !ctx.indices.empty() ? ctx.indices[0] : args.skv - args.sq;
  args.k_pos = ctx.indices.size() > 1 ? ctx.indices[1] : 0;
  args.q = ctx.in[AttentionGradOp::kQ];
  args.k = ctx.in[AttentionGradOp::kK];
  args.v = ctx.in[AttentionGradOp::kV];
  args.o = ctx.in[AttentionGradOp::kO];
  args.lse = static_cast<const float*>(ctx.in[AttentionGradOp::kLse]);
  args.dout = ctx.in[AttentionGradOp::kDout];
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    args.dq = out[0];
    args.dk = out[1];
    args.dv_out = out[2];
    return ctx.Check(k::LaunchAttentionGrad(args, ctx.stream));
  });
}

// attention_merge(o_acc, lse_acc, o_1, lse_1, ...): operands alternate o, lse.
Results LaunchAttentionMerge(const LaunchContext& ctx) {
  const Tensor& o = ctx.operand(0);
  if (o.rank() < 2 || ctx.in.size() < 4 || ctx.in.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention_merge: needs (o, lse) pairs with o of rank >= 2, got %d operands and o %s",
        ctx.in.size(), o.DebugTypeString()));
  }
  const int64_t width = o.shape().back();
  // The lse's elements: rows exist (and get an lse) even when the head dim is 0.
  const int64_t rows = ctx.operand(1).num_elements();
  std::vector<k::KMergePartial> partials;
  for (size_t i = 2; i + 1 < ctx.in.size(); i += 2) {
    partials.push_back({.o = ctx.in[i],
                        .lse = ctx.in[i + 1],
                        .o_type = ctx.operand(i).element_type(),
                        .lse_type = ctx.operand(i + 1).element_type()});
  }
  return ctx.AllocateAndLaunch([&](absl::Span<void* const> out) {
    return ctx.Check(k::LaunchAttentionMerge(o.element_type(), ctx.in[0], ctx.in[1], partials,
                                             out[0], out[1], rows, width, ctx.stream));
  });
}

}  // namespace

void RegisterLinalgLaunchers(TensorLauncherTable& table) {
  table.Register(OpKind::kMatmul, LaunchMatMul);
  table.RegisterReductions(LaunchReduce);
  table.Register(OpKind::kSoftmax, LaunchSoftmax);
  table.Register(OpKind::kLayerNorm, LaunchLayerNorm);
  table.Register(OpKind::kRmsNorm, LaunchRmsNorm);
  table.Register(OpKind::kAttention, LaunchAttention);
  table.Register(OpKind::kAttentionGrad, LaunchAttentionGrad);
  table.Register(OpKind::kAttentionMerge, LaunchAttentionMerge);
}

}  // namespace commir::cuda
