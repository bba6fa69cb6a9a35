// cross_entropy and cross_entropy_grad (commir/cross_entropy_op.h has the formulas).
// Each row of logits is reduced to its maximum, its sum of exponentials (pairwise), its
// target logit and, with label smoothing, its plain sum, in f32 (f64 for f64); the
// token losses are then summed pairwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/pairwise_sum.h"
#include "backend_cpu/shape_util.h"
#include "commir/scalar_math.h"
#include "runtime/compute_values.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

ElementType StatsType(ElementType logits) {
  return logits == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

absl::Status CheckOperands(std::string_view op_name, const Tensor& logits, const Tensor& labels) {
  if (absl::Status s = CheckFloatType(op_name, logits); !s.ok()) return s;
  if (logits.rank() == 0 || logits.dim(logits.rank() - 1) < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the logits need rank >= 1 and at least one class, got %s", op_name,
        logits.DebugTypeString()));
  }
  std::vector<int64_t> tokens(logits.shape().begin(), logits.shape().end() - 1);
  if (!IsIntegerType(labels.element_type()) || labels.shape() != tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the labels must be integers shaped like the logits %s without the class dim, got %s",
        op_name, logits.DebugTypeString(), labels.DebugTypeString()));
  }
  return absl::OkStatus();
}

// The labels, each checked to be a class index or ignore_index.
absl::StatusOr<std::vector<int64_t>> CheckedLabels(std::string_view op_name, const Tensor& labels,
                                                   int64_t classes, int64_t ignore_index) {
  std::vector<int64_t> values = labels.ToInt64();
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != ignore_index && (values[i] < 0 || values[i] >= classes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: label %d of token %d is not a class in [0, %d) nor ignore_index %d", op_name,
          values[i], i, classes, ignore_index));
    }
  }
  return values;
}

// log sum_j exp(row_j) as max + log sum_j exp(row_j - max): every exponent <= 0, so
// nothing overflows, and the loss is formed from (max - x_t) and the log-sum, which are
// exact or small, not as lse - x_t, which cancels when the logits are large.
template <typename T>
struct RowStats {
  T max;
  T log_sum;  // log sum_j exp(row_j - max); 0 for a row whose max is infinite
  T lse() const { return max + log_sum; }
};

template <typename T>
RowStats<T> Stats(const T* row, int64_t n) {
  T maximum = row[0];
  for (int64_t j = 1; j < n; ++j) maximum = std::max(maximum, row[j]);
  // An all -inf row has no finite maximum to shift by; its lse is -inf.
  if (std::isinf(maximum)) return {maximum, T{0}};
  T sum = PairwiseSum(row, n, 1, [maximum](T v) { return scalar_math::Exp(v - maximum); });
  return {maximum, scalar_math::Log(sum)};
}

}  // namespace

// The vocabulary-parallel form (cross_entropy_op.h): the shard's share of each token's
// loss, given the whole vocabulary's lse, reduced as the op says.
absl::StatusOr<CrossEntropyResult> CrossEntropyShare(const Tensor& logits, const Tensor& labels,
                                                     const Tensor& lse,
                                                     const CrossEntropyOptions& options,
                                                     const VocabShard& shard) {
  const int64_t local = logits.dim(logits.rank() - 1);
  if (shard.offset < 0 || shard.classes < local || shard.offset > shard.classes - local) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cross_entropy: classes [%d, %d) are not within the %d classes", shard.offset,
        shard.offset + local, shard.classes));
  }
  absl::StatusOr<std::vector<int64_t>> targets =
      CheckedLabels("cross_entropy", labels, shard.classes, options.ignore_index);
  if (!targets.ok()) return targets.status();
  const int64_t tokens = static_cast<int64_t>(targets->size());
  if (lse.num_elements() != tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cross_entropy: lse %s does not match the labels %s", lse.DebugTypeString(),
        labels.DebugTypeString()));
  }
  return DispatchFloatCompute(logits.element_type(), [&](auto zero) -> CrossEntropyResult {
    using T = decltype(zero);
    const std::vector<T> x = LoadAs<T>(logits);
    const std::vector<T> l = LoadAs<T>(lse);
    const T s = static_cast<T>(options.label_smoothing);
    const T z = static_cast<T>(options.z_loss);
    std::vector<T> share(tokens, T{0});
    int64_t counted = 0;
    for (int64_t i = 0; i < tokens; ++i) {
      const int64_t t = (*targets)[i];
      if (t == options.ignore_index) continue;
      ++counted;
      const T* row = x.data() + i * local;
      T value = shard.offset == 0 ? l[i] + z * l[i] * l[i] : T{0};
      if (t >= shard.offset && t < shard.offset + local) value -= (T{1} - s) * row[t - shard.offset];
      if (s != T{0}) {
        value -= s * PairwiseSum(row, local, 1, [](T v) { return v; }) /
                 static_cast<T>(shard.classes);
      }
      share[i] = value;
    }
    std::vector<int64_t> token_dims(logits.shape().begin(), logits.shape().end() - 1);
    CrossEntropyResult result;
    result.lse = StoreAs<T>(StatsType(logits.element_type()), token_dims, l);
    if (options.reduction == LossReduction::kNone) {
      result.loss = StoreAs<T>(logits.element_type(), token_dims, share);
    } else {
      T total = PairwiseSum(share.data(), tokens);
      if (options.reduction == LossReduction::kMean) total /= static_cast<T>(counted);
      result.loss = StoreAs<T>(logits.element_type(), {}, std::vector<T>{total});
    }
    return result;
  });
}

absl::StatusOr<CrossEntropyResult> CrossEntropy(const Tensor& logits, const Tensor& labels,
                                                const CrossEntropyOptions& options,
                                                const Tensor* lse,
                                                std::optional<VocabShard> shard) {
  if (absl::Status s = CheckOperands("cross_entropy", logits, labels); !s.ok()) return s;
  if (shard.has_value() != (lse != nullptr)) {
    return absl::InvalidArgumentError(
        "cross_entropy: the vocabulary-parallel form takes both the lse and the offset");
  }
  if (shard) return CrossEntropyShare(logits, labels, *lse, options, *shard);
  const int64_t classes = logits.dim(logits.rank() - 1);
  absl::StatusOr<std::vector<int64_t>> targets =
      CheckedLabels("cross_entropy", labels, classes, options.ignore_index);
  if (!targets.ok()) return targets.status();
  const int64_t tokens = static_cast<int64_t>(targets->size());
  return DispatchFloatCompute(logits.element_type(), [&](auto zero) -> CrossEntropyResult {
    using T = decltype(zero);
    const std::vector<T> x = LoadAs<T>(logits);
    const T s = static_cast<T>(options.label_smoothing);
    const T z = static_cast<T>(options.z_loss);
    std::vector<T> lse(tokens), loss(tokens, T{0});
    int64_t counted = 0;
    for (int64_t i = 0; i < tokens; ++i) {
      const T* row = x.data() + i * classes;
      const RowStats<T> stats = Stats(row, classes);
      lse[i] = stats.lse();
      if ((*targets)[i] == options.ignore_index) continue;
      ++counted;
      // (1 - s)(lse - x_t) + s (lse - mean_j x_j), both terms measured from the maximum.
      T value = stats.log_sum + (T{1} - s) * (stats.max - row[(*targets)[i]]);
      if (s != T{0}) {
        const T max = stats.max;
        value += s * PairwiseSum(row, classes, 1, [max](T v) { return max - v; }) /
                 static_cast<T>(classes);
      }
      if (z != T{0}) value += z * lse[i] * lse[i];
      loss[i] = value;
    }
    std::vector<int64_t> token_dims(logits.shape().begin(), logits.shape().end() - 1);
    CrossEntropyResult result;
    result.lse = StoreAs<T>(StatsType(logits.element_type()), token_dims, lse);
    if (options.reduction == LossReduction::kNone) {
      result.loss = StoreAs<T>(logits.element_type(), token_dims, loss);
    } else {
      T total = PairwiseSum(loss.data(), tokens);
      // As PyTorch: the mean over no token is 0 / 0.
      if (options.reduction == LossReduction::kMean) total /= static_cast<T>(counted);
      result.loss = StoreAs<T>(logits.element_type(), {}, std::vector<T>{total});
    }
    return result;
  });
}

absl::StatusOr<Tensor> CrossEntropyGrad(const Tensor& logits, const Tensor& labels,
                                        const Tensor& lse, const Tensor& dloss,
                                        const CrossEntropyOptions& options,
                                        std::optional<VocabShard> shard) {
  if (absl::Status s = CheckOperands("cross_entropy_grad", logits, labels); !s.ok()) return s;
  if (absl::Status s = CheckFloatType("cross_entropy_grad", dloss); !s.ok()) return s;
  const int64_t classes = logits.dim(logits.rank() - 1);
  // Unsharded: the whole vocabulary from class 0.
  const VocabShard block = shard.value_or(VocabShard{0, classes});
  if (block.offset < 0 || block.classes < classes || block.offset > block.classes - classes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cross_entropy_grad: classes [%d, %d) are not within the %d classes", block.offset,
        block.offset + classes, block.classes));
  }
  absl::StatusOr<std::vector<int64_t>> targets =
      CheckedLabels("cross_entropy_grad", labels, block.classes, options.ignore_index);
  if (!targets.ok()) return targets.status();
  const int64_t tokens = static_cast<int64_t>(targets->size());
  const bool per_token = options.reduction == LossReduction::kNone;
  if (lse.num_elements() != tokens || dloss.num_elements() != (per_token ? tokens : 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cross_entropy_grad: lse %s and dloss %s do not match the labels %s",
        lse.DebugTypeString(), dloss.DebugTypeString(), labels.DebugTypeString()));
  }
  ElementType compute = logits.element_type() == ElementType::kF64 ? ElementType::kF64
                                                                   : dloss.element_type();
  return DispatchFloatCompute(compute, [&](auto zero) -> Tensor {
    using T = decltype(zero);
    const std::vector<T> x = LoadAs<T>(logits);
    const std::vector<T> l = LoadAs<T>(lse);
    const std::vector<T> g = LoadAs<T>(dloss);
    const T s = static_cast<T>(options.label_smoothing);
    const T z = static_cast<T>(options.z_loss);
    const T uniform = s / static_cast<T>(block.classes);
    int64_t counted = 0;
    for (int64_t t : *targets) counted += t != options.ignore_index;
    std::vector<T> dx(x.size(), T{0});
    for (int64_t i = 0; i < tokens; ++i) {
      if ((*targets)[i] == options.ignore_index) continue;
      T w = per_token ? g[i] : g[0];
      if (options.reduction == LossReduction::kMean) w /= static_cast<T>(counted);
      const T p_scale = w * (T{1} + T{2} * z * l[i]);
      const T* row = x.data() + i * classes;
      T* out = dx.data() + i * classes;
      for (int64_t j = 0; j < classes; ++j) {
        out[j] = p_scale * scalar_math::Exp(row[j] - l[i]) - w * uniform;
      }
      const int64_t t = (*targets)[i] - block.offset;
      if (t >= 0 && t < classes) out[t] -= w * (T{1} - s);
    }
    return StoreAs<T>(dloss.element_type(), logits.shape(), dx);
  });
}

}  // namespace commir::cpu
