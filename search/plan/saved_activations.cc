#include "search/plan/saved_activations.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "commir/element_type.h"
#include "transforms/autodiff/forward_copy.h"
#include "transforms/sharding/megatron_layout.h"

namespace commir::search::plan {
namespace {

// What a layer keeps of a value its backward reads. With sequence parallelism
// Megatron-LM keeps the sequence-sharded input of a column-parallel GEMM (the norm's
// output) and all-gathers it again in the backward (Korthikanti et al., "Reducing
// Activation Recomputation in Large Transformer Models", section 4.2.2), launching that
// gather before the input-gradient GEMM so that the two overlap
// (LinearWithGradAccumulationAndAsyncCommunication); TransformerEngine's overlapped
// layers do the same. So a gather over tp is kept as its operand, 1/tp of it.
Type KeptType(const Value* value) {
  const Operation* def =
      value->kind() == Value::Kind::kResult ? value->defining_op() : nullptr;
  if (def != nullptr && def->Is(OpKind::kAllGather)) {
    const Attribute* axis = def->attrs().Find("axis");
    if (axis != nullptr && axis->axes() == AxisList{sharding::kMegatronTpAxis}) {
      return def->operand(0)->type();
    }
  }
  return value->type();
}

}  // namespace

int64_t DeviceBytes(Type type, const Function& function) {
  if (!type.is_tensor()) return 0;
  int64_t elements = type.num_elements();
  if (function.mesh() != nullptr) {
    for (const AxisList& axes : type.dim_axes()) elements /= function.mesh()->GroupSize(axes);
  }
  return elements * ElementTypeByteWidth(type.element_type());
}

SavedActivations MeasureSaved(const Function& forward, const Function& gradient) {
  // The gradient function recomputes the forward; values only that copy uses are
  // transient, and a forward value an op outside it uses is kept for the backward.
  const ForwardCopy copy = MatchForwardCopy(forward, gradient);
  auto is_backward = [&](const Operation* op) {
    return op->Is(OpKind::kReturn) || !copy.Recomputes(op);
  };
  // The gradient function returns the forward's results first (the re-run forward's
  // output, which the next layer keeps as its input), then the gradients: only a forward
  // value returned among the gradients is kept for this layer's backward.
  const int forward_results = static_cast<int>(forward.result_types().size());
  auto backward_use = [&](const Operation* user, const Value* value) {
    if (!user->Is(OpKind::kReturn)) return is_backward(user);
    for (int i = forward_results; i < user->num_operands(); ++i) {
      if (user->operand(i) == value) return true;
    }
    return false;
  };
  // A reshape or transpose of a kept value is the same tensor in another layout (the
  // attention's [b, s, heads, d] and [b, heads, s, d] views: FlashAttention reads and
  // writes either with strides), kept once: each value's layout root.
  absl::flat_hash_map<const Value*, const Value*> root;
  absl::flat_hash_set<const Value*> kept_roots;
  auto root_of = [&](const Value* v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  SavedActivations saved;
  auto visit = [&](Value* value, bool attention) {
    for (const Operation* user : value->users()) {
      if (!backward_use(user, value)) continue;
      if (!kept_roots.insert(root_of(value)).second) return;  // its layout is kept already
      const int64_t bytes = DeviceBytes(KeptType(value), gradient);
      saved.all_bytes += bytes;
      if (attention) saved.attention_bytes += bytes;
      auto twin = copy.values.find(value);
      saved.kept.push_back({value, twin == copy.values.end() ? nullptr : twin->second, bytes});
      return;
    }
  };
  // The attention's output and its reshaped and transposed views (the output
  // projection's input): what selective recomputation re-runs the attention to get.
  absl::flat_hash_set<const Value*> attention_outputs;
  auto from_attention = [&](const Operation* op) {
    if (op->Is(OpKind::kAttention) || IsUnfusedAttentionGemm(*op)) return true;
    return (op->Is(OpKind::kReshape) || op->Is(OpKind::kTranspose) ||
            op->Is(OpKind::kSoftmax)) &&
           attention_outputs.contains(op->operand(0));
  };
  // Activations are what the forward computes from the layer's input. A value computed
  // from the weights alone (the partitioner may all_gather a row-parallel projection's
  // weight rather than all-reduce its output, and the backward then reads the gathered
  // weight) is not one: Megatron-LM saves the weight itself for the backward
  // (megatron/core/tensor_parallel/layers.py,
  // LinearWithGradAccumulationAndAsyncCommunication: ctx.save_for_backward(input, weight)),
  // the parameter the model's state holds already (memory_model.h counts it).
  absl::flat_hash_set<const Value*> weights_only;
  for (int i = 1; i < gradient.body()->num_arguments(); ++i) {
    weights_only.insert(gradient.body()->argument(i));
  }
  visit(gradient.body()->argument(0), false);
  WalkOps(gradient.body(), [&](Operation* op) {
    if (is_backward(op)) return;
    bool from_weights = op->num_operands() > 0;
    for (const Value* operand : op->operands()) from_weights &= weights_only.contains(operand);
    if (from_weights) {
      for (Value* result : op->results()) weights_only.insert(result);
      return;
    }
    const bool attention = from_attention(op);
    if (op->Is(OpKind::kReshape) || op->Is(OpKind::kTranspose)) {
      root[op->result(0)] = root_of(op->operand(0));
    }
    for (Value* result : op->results()) {
      if (attention) attention_outputs.insert(result);
      visit(result, attention);
    }
  });
  return saved;
}

bool IsUnfusedAttentionGemm(const Operation& op) {
  return op.Is(OpKind::kMatmul) && op.num_results() == 1 && op.result(0)->type().rank() == 4;
}

}  // namespace commir::search::plan
