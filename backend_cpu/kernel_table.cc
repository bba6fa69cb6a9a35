#include "backend_cpu/kernel_table.h"

#include <optional>
#include <utility>

#include "backend_cpu/collectives.h"
#include "backend_cpu/dropout.h"
#include "backend_cpu/gather.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/moe.h"
#include "commir/attention_op.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;
using Tensors = absl::StatusOr<std::vector<Tensor>>;
using Operands = absl::Span<const Tensor* const>;
using Indices = absl::Span<const int64_t>;

Tensors One(absl::StatusOr<Tensor> result) {
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(*std::move(result));
  return out;
}

Type ResultType(const Operation& op) { return op.result(0)->type(); }

std::vector<int64_t> IntList(const Operation& op, absl::string_view key) {
  return op.RequiredIntListAttr(key);
}

// ---- Elementwise, convert, full -------------------------------------------------------

Tensors RunUnary(const Operation& op, Operands t, Indices) {
  return One(Unary(op.def().elementwise_fn(op.attrs()), *t[0]));
}

Tensors RunBinary(const Operation& op, Operands t, Indices) {
  return One(Binary(op.def().elementwise_fn(op.attrs()), *t[0], *t[1]));
}

Tensors RunTernary(const Operation& op, Operands t, Indices) {
  return One(Ternary(op.def().elementwise_fn(op.attrs()), *t[0], *t[1], *t[2]));
}

Tensors RunConvert(const Operation& op, Operands t, Indices) {
  return One(Convert(*t[0], ResultType(op).element_type()));
}

Tensors RunFull(const Operation& op, Operands, Indices) {
  const Type& type = ResultType(op);
  return One(Full(type.element_type(), type.dims(), op.RequiredNumberAttr("value")));
}

// ---- Linear algebra, reductions, normalisations, attention ----------------------------

Tensors RunMatMul(const Operation& op, Operands t, Indices) {
  return One(MatMul(*t[0], *t[1], op.BoolAttr("transpose_a"), op.BoolAttr("transpose_b"),
                    ResultType(op).element_type()));
}

Tensors RunReduce(const Operation& op, Operands t, Indices) {
  return One(Reduce(op.def().reduction_fn(op.attrs()), *t[0], IntList(op, "dims"),
                    op.BoolAttr("keepdim")));
}

Tensors RunSoftmax(const Operation& op, Operands t, Indices) {
  return One(Softmax(*t[0], op.IntAttr("dim")));
}

Tensors RunLayerNorm(const Operation& op, Operands t, Indices) {
  return One(LayerNorm(*t[0], *t[1], *t[2], op.NumberAttr("eps")));
}

Tensors RunRmsNorm(const Operation& op, Operands t, Indices) {
  return One(RmsNorm(*t[0], *t[1], op.NumberAttr("eps")));
}

Tensors RunAttention(const Operation& op, Operands t, Indices indices) {
  absl::StatusOr<AttentionResult> result =
      Attention(*t[0], *t[1], *t[2], AttentionOptionsOf(op, t[0]->dim(3), indices));
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(std::move(result->output));
  if (op.num_results() == 2) out.push_back(std::move(result->lse));
  return out;
}

Tensors RunAttentionGrad(const Operation& op, Operands t, Indices indices) {
  const AttentionGradOp view(op);
  AttentionOptions options;
  options.causal = view.causal();
  options.scale = view.scale(t[AttentionGradOp::kQ]->dim(3));
  options.partial_keys = view.partial_keys();
  if (!indices.empty()) options.q_pos = indices[0];
  if (indices.size() > 1) options.k_pos = indices[1];
  absl::StatusOr<AttentionGradResult> result =
      AttentionGrad(*t[AttentionGradOp::kQ], *t[AttentionGradOp::kK], *t[AttentionGradOp::kV],
                    *t[AttentionGradOp::kO], *t[AttentionGradOp::kLse],
                    *t[AttentionGradOp::kDout], options);
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(std::move(result->dq));
  out.push_back(std::move(result->dk));
  out.push_back(std::move(result->dv));
  return out;
}

// The offsets are the index operands; global_shape is set with them. The step, when
// given, is the second tensor operand (an i32 or i64 scalar), read as a 64-bit word.
Tensors RunDropout(const Operation& op, Operands t, Indices indices) {
  absl::StatusOr<DropoutIndexing> indexing =
      DropoutIndexingOf(t[0]->shape(), op.attrs().Find("global_shape") != nullptr
                                           ? op.attrs().Find("global_shape")->int_list()
                                           : std::nullopt,
                        indices, op.RequiredNumberAttr("rate"));
  if (!indexing.ok()) return indexing.status();
  const uint64_t step = t.size() > 1 ? static_cast<uint64_t>(t[1]->ToInt64()[0]) : 0;
  return One(Dropout(*t[0], static_cast<uint64_t>(op.RequiredIntAttr("seed")), *indexing, step));
}

// An index operand (the offset) marks the vocabulary-parallel form.
std::optional<VocabShard> VocabShardOf(const Operation& op, Indices indices) {
  if (indices.empty()) return std::nullopt;
  return VocabShard{indices[0], CrossEntropyOptionsOf(op).classes};
}

Tensors RunCrossEntropy(const Operation& op, Operands t, Indices indices) {
  std::optional<VocabShard> shard = VocabShardOf(op, indices);
  absl::StatusOr<CrossEntropyResult> result =
      CrossEntropy(*t[0], *t[1], CrossEntropyOptionsOf(op), shard ? t[kCeLse] : nullptr, shard);
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(std::move(result->loss));
  out.push_back(std::move(result->lse));
  return out;
}

// Operands alternate o, lse: the accumulator's pair, then each partial's.
Tensors RunAttentionMerge(const Operation&, Operands t, Indices) {
  std::vector<const Tensor*> outputs, lses;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    outputs.push_back(t[i]);
    lses.push_back(t[i + 1]);
  }
  absl::StatusOr<AttentionMergeResult> result = AttentionMerge(outputs, lses);
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(std::move(result->output));
  out.push_back(std::move(result->lse));
  return out;
}

Tensors RunCrossEntropyGrad(const Operation& op, Operands t, Indices indices) {
  return One(CrossEntropyGrad(*t[kCeLogits], *t[kCeLabels], *t[kCeLse], *t[kCeDloss],
                              CrossEntropyOptionsOf(op), VocabShardOf(op, indices)));
}

// ---- Selection -------------------------------------------------------------------------

Tensors RunTopK(const Operation& op, Operands t, Indices) {
  absl::StatusOr<TopKResult> result = TopK(*t[0], op.RequiredIntAttr("k"));
  if (!result.ok()) return result.status();
  std::vector<Tensor> out;
  out.push_back(std::move(result->values));
  out.push_back(std::move(result->indices));
  return out;
}

// ---- Layout and dynamic slices ---------------------------------------------------------

Tensors RunReshape(const Operation& op, Operands t, Indices) {
  return One(Reshape(*t[0], ResultType(op).dims()));
}

Tensors RunTranspose(const Operation& op, Operands t, Indices) {
  return One(Transpose(*t[0], IntList(op, "perm")));
}

Tensors RunSlice(const Operation& op, Operands t, Indices) {
  return One(Slice(*t[0], IntList(op, "start"), IntList(op, "size")));
}

Tensors RunConcat(const Operation& op, Operands t, Indices) {
  return One(Concat(t, op.RequiredIntAttr("dim")));
}

Tensors RunBroadcast(const Operation& op, Operands t, Indices) {
  return One(Broadcast(*t[0], ResultType(op).dims()));
}

// On one device a reshard is the identity: layouts only say where parts live.
Tensors RunReshard(const Operation&, Operands t, Indices) { return One(Tensor(*t[0])); }

Tensors RunDynamicSlice(const Operation& op, Operands t, Indices indices) {
  return One(DynamicSlice(*t[0], op.RequiredIntAttr("dim"), indices[0],
                          op.RequiredIntAttr("size")));
}

Tensors RunDynamicUpdateSlice(const Operation& op, Operands t, Indices indices) {
  return One(DynamicUpdateSlice(*t[0], *t[1], op.RequiredIntAttr("dim"), indices[0]));
}

// ---- Rows at integer indices -------------------------------------------------------------

// An index operand is the offset of a device's share of a split table.
Tensors RunGather(const Operation& op, Operands t, Indices indices) {
  std::optional<int64_t> offset;
  if (!indices.empty()) offset = indices[0];
  return One(Gather(*t[0], *t[1], op.RequiredIntAttr("axis"), offset));
}

Tensors RunScatterAdd(const Operation& op, Operands t, Indices indices) {
  std::optional<int64_t> offset;
  if (!indices.empty()) offset = indices[0];
  return One(ScatterAdd(*t[0], *t[1], *t[2], op.RequiredIntAttr("axis"), offset));
}

// ---- Mixture of experts ------------------------------------------------------------------

// The verifier checked that `groups` divides the tokens and the buffer's columns.
Tensors RunMoeDispatch(const Operation& op, Operands t, Indices) {
  const std::vector<int64_t>& buffer = ResultType(op).dims();
  const int64_t groups = op.attrs().GetInt("groups", 1);
  return One(MoeDispatch(*t[0], *t[1], buffer[0], buffer[1] / groups, groups));
}

Tensors RunMoeCollect(const Operation& op, Operands t, Indices) {
  return One(MoeCollect(*t[0], *t[1], op.attrs().GetInt("groups", 1)));
}

// ---- Collectives -------------------------------------------------------------------------

// Every member receives the one result.
Tensors ToEveryMember(absl::StatusOr<Tensor> result, size_t members) {
  if (!result.ok()) return result.status();
  return std::vector<Tensor>(members, *result);
}

Tensors RunAllGather(const Operation& op, Operands parts) {
  return ToEveryMember(AllGather(parts, op.RequiredIntAttr("dim")), parts.size());
}

Tensors RunAllReduce(const Operation& op, Operands parts) {
  return ToEveryMember(AllReduce(parts, op.def().reduction_fn(op.attrs())), parts.size());
}

Tensors RunReduceScatter(const Operation& op, Operands parts) {
  return ReduceScatter(parts, op.RequiredIntAttr("dim"), op.def().reduction_fn(op.attrs()));
}

Tensors RunAllToAll(const Operation& op, Operands parts) {
  return AllToAll(parts, op.RequiredIntAttr("split_dim"), op.RequiredIntAttr("concat_dim"));
}

Tensors RunShift(const Operation& op, Operands parts) { return Shift(parts, op.IntAttr("offset")); }

TensorKernelTable BuildTensorKernels() {
  TensorKernelTable table;
  table.RegisterElementwise(RunUnary, RunBinary, RunTernary);
  table.Register(OpKind::kConvert, RunConvert);
  table.Register(OpKind::kFull, RunFull);
  table.Register(OpKind::kMatmul, RunMatMul);
  table.RegisterReductions(RunReduce);
  table.Register(OpKind::kSoftmax, RunSoftmax);
  table.Register(OpKind::kLayerNorm, RunLayerNorm);
  table.Register(OpKind::kRmsNorm, RunRmsNorm);
  table.Register(OpKind::kAttention, RunAttention);
  table.Register(OpKind::kAttentionGrad, RunAttentionGrad);
  table.Register(OpKind::kDropout, RunDropout);
  table.Register(OpKind::kCrossEntropy, RunCrossEntropy);
  table.Register(OpKind::kCrossEntropyGrad, RunCrossEntropyGrad);
  table.Register(OpKind::kAttentionMerge, RunAttentionMerge);
  table.Register(OpKind::kTopK, RunTopK);
  table.Register(OpKind::kReshape, RunReshape);
  table.Register(OpKind::kTranspose, RunTranspose);
  table.Register(OpKind::kSlice, RunSlice);
  table.Register(OpKind::kConcat, RunConcat);
  table.Register(OpKind::kBroadcast, RunBroadcast);
  table.Register(OpKind::kReshard, RunReshard);
  table.Register(OpKind::kDynamicSlice, RunDynamicSlice);
  table.Register(OpKind::kDynamicUpdateSlice, RunDynamicUpdateSlice);
  table.Register(OpKind::kGather, RunGather);
  table.Register(OpKind::kScatterAdd, RunScatterAdd);
  table.Register(OpKind::kMoeDispatch, RunMoeDispatch);
  table.Register(OpKind::kMoeCollect, RunMoeCollect);
  return table;
}

CollectiveKernelTable BuildCollectiveKernels() {
  CollectiveKernelTable table;
  table.Register(OpKind::kAllGather, RunAllGather);
  table.Register(OpKind::kAllReduce, RunAllReduce);
  table.Register(OpKind::kReduceScatter, RunReduceScatter);
  table.Register(OpKind::kAllToAll, RunAllToAll);
  table.Register(OpKind::kShift, RunShift);
  return table;
}

}  // namespace

AttentionOptions AttentionOptionsOf(const Operation& op, int64_t head_dim,
                                    absl::Span<const int64_t> indices) {
  AttentionOptions options;
  options.causal = op.BoolAttr("causal");
  options.scale = AttentionOp(op).scale(head_dim);
  if (!indices.empty()) options.q_pos = indices[0];
  if (indices.size() > 1) options.k_pos = indices[1];
  return options;
}

const TensorKernelTable& CpuTensorKernels() {
  static const TensorKernelTable* const table = new TensorKernelTable(BuildTensorKernels());
  return *table;
}

const CollectiveKernelTable& CpuCollectiveKernels() {
  static const CollectiveKernelTable* const table =
      new CollectiveKernelTable(BuildCollectiveKernels());
  return *table;
}

absl::Status CheckCpuKernelTables(const TensorKernelTable& tensor,
                                  const CollectiveKernelTable& collective) {
  if (absl::Status s = tensor.CheckComplete("cpu", "tensor op", NeedsTensorKernel); !s.ok()) {
    return s;
  }
  return collective.CheckComplete("cpu", "collective", NeedsCollectiveKernel);
}

}  // namespace commir::cpu
