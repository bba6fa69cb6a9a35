#include "backend_cpu/cpu_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backend_cpu/collectives.h"
#include "backend_cpu/kernels.h"
#include "commir/attention_op.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

absl::StatusOr<std::vector<Tensor>> One(absl::StatusOr<Tensor> result) {
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(*std::move(result));
  return out;
}

UnaryOp ToUnary(const Operation& op) {
  switch (op.kind()) {
    case OpKind::kNeg: return UnaryOp::kNeg;
    case OpKind::kAbs: return UnaryOp::kAbs;
    case OpKind::kExp: return UnaryOp::kExp;
    case OpKind::kLog: return UnaryOp::kLog;
    case OpKind::kSqrt: return UnaryOp::kSqrt;
    case OpKind::kRsqrt: return UnaryOp::kRsqrt;
    case OpKind::kTanh: return UnaryOp::kTanh;
    case OpKind::kSigmoid: return UnaryOp::kSigmoid;
    case OpKind::kRelu: return UnaryOp::kRelu;
    case OpKind::kSilu: return UnaryOp::kSilu;
    default:
      return op.EnumAttr("approximate") == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf;
  }
}

BinaryOp ToBinary(OpKind kind) {
  switch (kind) {
    case OpKind::kAdd: return BinaryOp::kAdd;
    case OpKind::kSub: return BinaryOp::kSub;
    case OpKind::kMul: return BinaryOp::kMul;
    case OpKind::kDiv: return BinaryOp::kDiv;
    case OpKind::kMax: return BinaryOp::kMax;
    case OpKind::kMin: return BinaryOp::kMin;
    default: return BinaryOp::kPow;
  }
}

ReduceOp ToReduce(absl::string_view name) {
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  return ReduceOp::kSum;
}

std::vector<int64_t> IntList(const Operation& op, absl::string_view key) {
  return op.RequiredIntListAttr(key);
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunOp(const Operation& op,
                                                      const runtime::OpContext& /*context*/,
                                                      absl::Span<const Tensor* const> tensors,
                                                      absl::Span<const int64_t> indices) {
  return RunOp(op, tensors, indices);
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunCollective(
    const Operation& op, const runtime::CollectiveContext& context,
    absl::Span<const Tensor* const> parts) {
  if (context.local.size() != context.group.size()) {
    return absl::InvalidArgumentError(
        "the cpu backend runs a collective only with every group member's part");
  }
  return RunCollective(op, parts);
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunOp(const Operation& op,
                                                      absl::Span<const Tensor* const> t,
                                                      absl::Span<const int64_t> indices) {
  Type result_type = op.num_results() > 0 ? op.result(0)->type() : Type();
  switch (op.kind()) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSilu:
    case OpKind::kGelu:
      return One(Unary(ToUnary(op), *t[0]));
    case OpKind::kConvert:
      return One(Convert(*t[0], result_type.element_type()));
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kPow:
      return One(Binary(ToBinary(op.kind()), *t[0], *t[1]));
    case OpKind::kFull:
      return One(Full(result_type.element_type(), result_type.dims(),
                      op.RequiredNumberAttr("value")));
    case OpKind::kMatmul:
      return One(MatMul(*t[0], *t[1], op.BoolAttr("transpose_a"), op.BoolAttr("transpose_b"),
                        result_type.element_type()));
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMean: {
      ReduceOp reduce = op.Is(OpKind::kReduceSum)   ? ReduceOp::kSum
                        : op.Is(OpKind::kReduceMax) ? ReduceOp::kMax
                                                    : ReduceOp::kMean;
      return One(Reduce(reduce, *t[0], IntList(op, "dims"), op.BoolAttr("keepdim")));
    }
    case OpKind::kSoftmax:
      return One(Softmax(*t[0], op.IntAttr("dim")));
    case OpKind::kLayerNorm:
      return One(LayerNorm(*t[0], *t[1], *t[2], op.NumberAttr("eps")));
    case OpKind::kRmsNorm:
      return One(RmsNorm(*t[0], *t[1], op.NumberAttr("eps")));
    case OpKind::kAttention: {
      AttentionOptions options;
      options.causal = op.BoolAttr("causal");
      options.scale = AttentionOp(op).scale(t[0]->dim(3));
      if (!indices.empty()) options.q_pos = indices[0];
      if (indices.size() > 1) options.k_pos = indices[1];
      absl::StatusOr<AttentionResult> result = Attention(*t[0], *t[1], *t[2], options);
      if (!result.ok()) return result.status();
      std::vector<Tensor> out;
      out.push_back(std::move(result->output));
      if (op.num_results() == 2) out.push_back(std::move(result->lse));
      return out;
    }
    case OpKind::kReshape:
      return One(Reshape(*t[0], result_type.dims()));
    case OpKind::kTranspose:
      return One(Transpose(*t[0], IntList(op, "perm")));
    case OpKind::kSlice:
      return One(Slice(*t[0], IntList(op, "start"), IntList(op, "size")));
    case OpKind::kConcat:
      return One(Concat(t, op.RequiredIntAttr("dim")));
    case OpKind::kBroadcast:
      return One(Broadcast(*t[0], result_type.dims()));
    case OpKind::kReshard:
      // On one device a reshard is the identity: layouts only say where parts live.
      return One(Tensor(*t[0]));
    case OpKind::kDynamicSlice:
      return One(DynamicSlice(*t[0], op.RequiredIntAttr("dim"), indices[0], op.RequiredIntAttr("size")));
    case OpKind::kDynamicUpdateSlice:
      return One(DynamicUpdateSlice(*t[0], *t[1], op.RequiredIntAttr("dim"), indices[0]));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("the cpu backend does not run '", op.name(), "' as a tensor op"));
  }
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunCollective(const Operation& op,
                                                              absl::Span<const Tensor* const> parts) {
  switch (op.kind()) {
    case OpKind::kAllGather: {
      absl::StatusOr<Tensor> gathered = AllGather(parts, op.RequiredIntAttr("dim"));
      if (!gathered.ok()) return gathered.status();
      return std::vector<Tensor>(parts.size(), *gathered);
    }
    case OpKind::kAllReduce: {
      absl::StatusOr<Tensor> reduced = AllReduce(parts, ToReduce(op.EnumAttr("reduce")));
      if (!reduced.ok()) return reduced.status();
      return std::vector<Tensor>(parts.size(), *reduced);
    }
    case OpKind::kReduceScatter:
      return ReduceScatter(parts, op.RequiredIntAttr("dim"), ToReduce(op.EnumAttr("reduce")));
    case OpKind::kAllToAll:
      return AllToAll(parts, op.RequiredIntAttr("split_dim"), op.RequiredIntAttr("concat_dim"));
    case OpKind::kShift:
      return Shift(parts, op.IntAttr("offset"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("'", op.name(), "' is not a collective the cpu backend knows"));
  }
}

}  // namespace commir::cpu
