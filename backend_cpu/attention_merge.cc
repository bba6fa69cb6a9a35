// The online-softmax merge of partial attention results (attention_merge).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backend_cpu/kernels.h"
#include "commir/element_type.h"
#include "commir/online_softmax.h"
#include "runtime/compute_values.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

// The shapes and types the op's inference guarantees, checked again: a kernel is also
// called directly (tests, the interpreter's callers) and must not read out of bounds.
absl::Status CheckMergeOperands(absl::Span<const Tensor* const> outputs,
                                absl::Span<const Tensor* const> lses) {
  if (outputs.size() != lses.size() || outputs.size() < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention_merge: needs the accumulator and at least one partial, each an (o, lse) "
        "pair; got %d outputs and %d lses", outputs.size(), lses.size()));
  }
  const Tensor& o = *outputs[0];
  const ElementType type = o.element_type();
  if ((type != ElementType::kF32 && type != ElementType::kF64) || lses[0]->element_type() != type) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention_merge: the accumulator must be f32 or f64 (o and lse alike), got %s and %s",
        o.DebugTypeString(), lses[0]->DebugTypeString()));
  }
  if (o.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention_merge: o must have rank >= 2, got %s", o.DebugTypeString()));
  }
  const std::vector<int64_t> rows(o.shape().begin(), o.shape().end() - 1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!IsFloatType(outputs[i]->element_type()) || !IsFloatType(lses[i]->element_type()) ||
        outputs[i]->shape() != o.shape() || lses[i]->shape() != rows) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attention_merge: pair %d is (%s, %s), expected float tensors shaped like the "
          "accumulator (%s, %s)", i, outputs[i]->DebugTypeString(),
          lses[i]->DebugTypeString(), o.DebugTypeString(), lses[0]->DebugTypeString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AttentionMergeResult> AttentionMerge(absl::Span<const Tensor* const> outputs,
                                                    absl::Span<const Tensor* const> lses) {
  if (absl::Status s = CheckMergeOperands(outputs, lses); !s.ok()) return s;
  const Tensor& acc = *outputs[0];
  const int64_t width = acc.shape().back();
  return DispatchFloatCompute(acc.element_type(), [&](auto zero) -> AttentionMergeResult {
    using T = decltype(zero);
    std::vector<T> o = LoadAs<T>(acc);
    std::vector<T> lse = LoadAs<T>(*lses[0]);
    for (size_t i = 1; i < outputs.size(); ++i) {
      const std::vector<T> o_b = LoadAs<T>(*outputs[i]);
      const std::vector<T> lse_b = LoadAs<T>(*lses[i]);
      for (size_t row = 0; row < lse.size(); ++row) {
        const online_softmax::RowWeights<T> w = online_softmax::MergeWeights(lse[row], lse_b[row]);
        lse[row] = w.lse;
        T* out = o.data() + row * width;
        const T* in = o_b.data() + row * width;
        for (int64_t d = 0; d < width; ++d) out[d] = online_softmax::MergeOutput(out[d], in[d], w);
      }
    }
    return {StoreAs<T>(acc.element_type(), acc.shape(), o),
            StoreAs<T>(lses[0]->element_type(), lses[0]->shape(), lse)};
  });
}

}  // namespace commir::cpu
