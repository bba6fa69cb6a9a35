// Softmax, layer normalisation and RMS normalisation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
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

// Softmax of `count` values spaced `stride` apart, in place.
template <typename T>
void SoftmaxInPlace(T* values, int64_t count, int64_t stride) {
  if (count == 0) return;
  // Subtracting the maximum keeps every exponent <= 0, so exp cannot overflow.
  T maximum = values[0];
  for (int64_t i = 1; i < count; ++i) maximum = std::max(maximum, values[i * stride]);
  for (int64_t i = 0; i < count; ++i) {
    values[i * stride] = scalar_math::Exp(values[i * stride] - maximum);
  }
  const T inverse_sum = T{1} / PairwiseSum(values, count, stride);
  for (int64_t i = 0; i < count; ++i) values[i * stride] *= inverse_sum;
}

// InvalidArgument unless `param` is a 1-D float tensor of the normalised extent.
absl::Status CheckNormParameter(std::string_view op_name, std::string_view param_name,
                                const Tensor& x, const Tensor& param) {
  if (absl::Status status = CheckFloatType(op_name, param); !status.ok()) return status;
  if (param.rank() != 1 || param.dim(0) != x.dim(x.rank() - 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s must be 1-D with the last extent of %s, got %s", op_name,
                        param_name, x.DebugTypeString(), param.DebugTypeString()));
  }
  return absl::OkStatus();
}

absl::Status CheckNormInput(std::string_view op_name, const Tensor& x) {
  if (absl::Status status = CheckFloatType(op_name, x); !status.ok()) return status;
  if (x.rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s normalises the last dimension and needs rank >= 1", op_name));
  }
  return absl::OkStatus();
}

// Applies `normalize_row(row, n)` to every row of the last dimension of x, computing in T
// and rounding to x's element type once at the end.
template <typename T, typename Fn>
Tensor NormalizeRows(const Tensor& x, Fn normalize_row) {
  std::vector<T> values = LoadAs<T>(x);
  const int64_t row_length = x.dim(x.rank() - 1);
  for (int64_t start = 0; start < x.num_elements(); start += row_length) {
    normalize_row(values.data() + start, row_length);
  }
  return StoreAs<T>(x.element_type(), x.shape(), values);
}

}  // namespace

absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim) {
  if (absl::Status status = CheckFloatType("softmax", x); !status.ok()) return status;
  // A 0-d tensor has a single "row" of one element: accept dim 0 / -1 for it.
  absl::StatusOr<int64_t> softmax_dim =
      NormalizeDim("softmax", dim, std::max<int64_t>(x.rank(), 1));
  if (!softmax_dim.ok()) return softmax_dim.status();
  const int64_t count = x.rank() == 0 ? 1 : x.dim(*softmax_dim);
  int64_t inner = 1;  // elements between consecutive entries of a softmax slice
  for (int64_t d = *softmax_dim + 1; d < x.rank(); ++d) inner *= x.dim(d);
  return DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values = LoadAs<T>(x);
    const int64_t outer_stride = count * inner;
    for (int64_t outer = 0; outer < x.num_elements(); outer += outer_stride) {
      for (int64_t i = 0; i < inner; ++i) SoftmaxInPlace(values.data() + outer + i, count, inner);
    }
    return StoreAs<T>(x.element_type(), x.shape(), values);
  });
}

absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 double eps) {
  if (absl::Status status = CheckNormInput("layernorm", x); !status.ok()) return status;
  if (absl::Status status = CheckNormParameter("layernorm", "weight", x, weight); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckNormParameter("layernorm", "bias", x, bias); !status.ok()) {
    return status;
  }
  return DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> gamma = LoadAs<T>(weight);
    const std::vector<T> beta = LoadAs<T>(bias);
    return NormalizeRows<T>(x, [&](T* row, int64_t n) {
      // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
      const T mean = PairwiseSum(row, n) / static_cast<T>(n);
      for (int64_t i = 0; i < n; ++i) row[i] -= mean;
      const T sum_of_squares = PairwiseSum(row, n, 1, [](T value) { return value * value; });
      const T inverse_std =
          T{1} / std::sqrt(sum_of_squares / static_cast<T>(n) + static_cast<T>(eps));
      for (int64_t i = 0; i < n; ++i) row[i] = row[i] * inverse_std * gamma[i] + beta[i];
    });
  });
}

absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& weight, double eps) {
  if (absl::Status status = CheckNormInput("rmsnorm", x); !status.ok()) return status;
  if (absl::Status status = CheckNormParameter("rmsnorm", "weight", x, weight); !status.ok()) {
    return status;
  }
  return DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> gamma = LoadAs<T>(weight);
    return NormalizeRows<T>(x, [&](T* row, int64_t n) {
      const T sum_of_squares = PairwiseSum(row, n, 1, [](T value) { return value * value; });
      const T inverse_rms =
          T{1} / std::sqrt(sum_of_squares / static_cast<T>(n) + static_cast<T>(eps));
      for (int64_t i = 0; i < n; ++i) row[i] = row[i] * inverse_rms * gamma[i];
    });
  });
}

}  // namespace commir::cpu
