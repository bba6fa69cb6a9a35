// Reductions over any set of dimensions. The reduced dimensions are first transposed to
// the end, so every output element reduces one contiguous run of the input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/pairwise_sum.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "commir/scalar_math.h"
#include "runtime/compute_values.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

// Which dimensions survive and how the input is regrouped as [kept..., reduced...].
struct ReducePlan {
  std::vector<bool> is_reduced;      // per input dimension
  std::vector<int64_t> permutation;  // kept dimensions in order, then reduced ascending
  int64_t reduced_count = 1;         // elements reduced into each output element
  std::vector<int64_t> result_shape;
};

absl::StatusOr<ReducePlan> PlanReduce(std::string_view op_name, const Tensor& x,
                                      absl::Span<const int64_t> dims, bool keepdim) {
  ReducePlan plan;
  plan.is_reduced.assign(x.rank(), false);
  for (int64_t dim : dims) {
    absl::StatusOr<int64_t> normalized = NormalizeDim(op_name, dim, x.rank());
    if (!normalized.ok()) return normalized.status();
    if (plan.is_reduced[*normalized]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: dimension %d is listed twice in dims [%s]", op_name, *normalized,
                          absl::StrJoin(dims, ", ")));
    }
    plan.is_reduced[*normalized] = true;
  }
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (plan.is_reduced[d]) {
      plan.reduced_count *= x.dim(d);
      if (keepdim) plan.result_shape.push_back(1);
    } else {
      plan.permutation.push_back(d);
      plan.result_shape.push_back(x.dim(d));
    }
  }
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (plan.is_reduced[d]) plan.permutation.push_back(d);
  }
  return plan;
}

// x's elements as T, transposed to [kept..., reduced...] so each output element reduces
// a contiguous run.
template <typename T>
std::vector<T> LoadGrouped(const Tensor& x, const ReducePlan& plan) {
  std::vector<int64_t> identity(x.rank());
  std::iota(identity.begin(), identity.end(), 0);
  if (plan.permutation == identity) return LoadAs<T>(x);
  return LoadAs<T>(*Transpose(x, plan.permutation));  // a valid permutation by construction
}

template <typename T>
T MaxPropagatingNan(const T* values, int64_t count) {
  T result = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
      if (std::isnan(values[i])) return values[i];
    }
    result = std::max(result, values[i]);
  }
  return result;
}

template <typename T>
T MinPropagatingNan(const T* values, int64_t count) {
  T result = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
      if (std::isnan(values[i])) return values[i];
    }
    result = std::min(result, values[i]);
  }
  return result;
}

// Reduces each run of `count` consecutive values of a float buffer.
template <typename T>
std::vector<T> ReduceFloatRuns(ReduceOp op, const std::vector<T>& values, int64_t count,
                               int64_t runs) {
  std::vector<T> result(runs);
  for (int64_t r = 0; r < runs; ++r) {
    const T* run = values.data() + r * count;
    switch (op) {
      case ReduceOp::kSum: result[r] = PairwiseSum(run, count); break;
      // An empty mean is 0 / 0 = NaN, as in NumPy.
      case ReduceOp::kMean: result[r] = PairwiseSum(run, count) / static_cast<T>(count); break;
      case ReduceOp::kMax: result[r] = MaxPropagatingNan(run, count); break;
      case ReduceOp::kMin: result[r] = MinPropagatingNan(run, count); break;
    }
  }
  return result;
}

// The smallest and largest value an integer element type holds: the results of empty
// max and min reductions.
std::pair<int64_t, int64_t> IntegerRange(ElementType type) {
  switch (type) {
    case ElementType::kI32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case ElementType::kI1: return {0, 1};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

absl::StatusOr<std::vector<int64_t>> ReduceIntegerRuns(ReduceOp op, ElementType type,
                                                       const std::vector<int64_t>& values,
                                                       int64_t count, int64_t runs) {
  if (op == ReduceOp::kMean && count == 0 && runs > 0) {
    return absl::InvalidArgumentError(
        "reduce_mean: the mean of an empty integer reduction is undefined");
  }
  std::vector<int64_t> result(runs);
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t* run = values.data() + r * count;
    if (op == ReduceOp::kMax) {
      result[r] = std::max(MaxPropagatingNan(run, count), IntegerRange(type).first);
    } else if (op == ReduceOp::kMin) {
      result[r] = std::min(MinPropagatingNan(run, count), IntegerRange(type).second);
    } else {
      // Summed modulo 2^64, like add.
      int64_t sum = 0;
      for (int64_t i = 0; i < count; ++i) sum = scalar_math::WrappingAdd(sum, run[i]);
      result[r] = sum;
      if (op == ReduceOp::kMean) result[r] = scalar_math::FloorDiv(result[r], count);
    }
  }
  return result;
}

}  // namespace

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMean: return "mean";
  }
  return "?";
}

absl::StatusOr<Tensor> Reduce(ReduceOp op, const Tensor& x, absl::Span<const int64_t> dims,
                              bool keepdim) {
  const std::string op_name = absl::StrFormat("reduce_%s", ReduceOpName(op));
  absl::StatusOr<ReducePlan> plan = PlanReduce(op_name, x, dims, keepdim);
  if (!plan.ok()) return plan.status();

  const int64_t runs = runtime::NumElements(plan->result_shape);
  if (IsIntegerType(x.element_type())) {
    absl::StatusOr<std::vector<int64_t>> reduced = ReduceIntegerRuns(
        op, x.element_type(), LoadGrouped<int64_t>(x, *plan), plan->reduced_count, runs);
    if (!reduced.ok()) return reduced.status();
    return Tensor::FromInt64(x.element_type(), plan->result_shape, *reduced);
  }
  return DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> reduced =
        ReduceFloatRuns(op, LoadGrouped<T>(x, *plan), plan->reduced_count, runs);
    return StoreAs<T>(x.element_type(), plan->result_shape, reduced);
  });
}

}  // namespace commir::cpu
