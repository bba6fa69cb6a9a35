// top_k over the last dimension.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "backend_cpu/kernels.h"
#include "commir/element_type.h"
#include "runtime/compute_values.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// Whether entry i goes before entry j: NaN first, then larger values, then lower indices.
// A total order, so the selection is the same whatever the sort does with ties.
template <typename T>
bool RanksBefore(const T* row, int64_t i, int64_t j) {
  const bool nan_i = IsNan(row[i]);
  const bool nan_j = IsNan(row[j]);
  if (nan_i != nan_j) return nan_i;
  if (!nan_i && row[i] != row[j]) return row[i] > row[j];
  return i < j;
}

// Fills `indices` (rows x k) with the selected positions of each row. T holds every value
// of x exactly (double for floats, int64_t for integers).
template <typename T>
void SelectRows(const Tensor& x, int64_t n, int64_t k, std::vector<int64_t>& indices) {
  const std::vector<T> values = runtime::LoadAs<T>(x);
  const int64_t rows = n == 0 ? 0 : x.num_elements() / n;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = values.data() + r * n;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](int64_t i, int64_t j) { return RanksBefore(row, i, j); });
    std::copy(order.begin(), order.begin() + k, indices.begin() + r * k);
  }
}

}  // namespace

absl::StatusOr<TopKResult> TopK(const Tensor& x, int64_t k) {
  const ElementType type = x.element_type();
  if (!IsFloatType(type) && !(IsIntegerType(type) && type != ElementType::kI1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_k needs a float or integer tensor, got %s", x.DebugTypeString()));
  }
  if (x.rank() == 0) {
    return absl::InvalidArgumentError("top_k selects along the last dimension and needs rank >= 1");
  }
  const int64_t n = x.dim(x.rank() - 1);
  if (k < 1 || k > n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "top_k: k = %d must be in [1, %d], the last extent of %s", k, n, x.DebugTypeString()));
  }
  std::vector<int64_t> shape = x.shape();
  shape.back() = k;
  const int64_t rows = x.num_elements() / n;
  std::vector<int64_t> indices(static_cast<size_t>(rows * k));
  if (IsFloatType(type)) {
    SelectRows<double>(x, n, k, indices);
  } else {
    SelectRows<int64_t>(x, n, k, indices);
  }
  // The values are the selected elements' own bytes: nothing is rounded or canonicalised
  // (a NaN keeps its payload, -0 stays -0).
  TopKResult result{Tensor(type, shape), Tensor(ElementType::kI64, shape)};
  const int64_t width = ElementTypeByteWidth(type);
  const auto* in = static_cast<const unsigned char*>(x.raw_data());
  auto* out = static_cast<unsigned char*>(result.values.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < k; ++t) {
      std::memcpy(out + (r * k + t) * width, in + (r * n + indices[r * k + t]) * width,
                  static_cast<size_t>(width));
    }
  }
  std::copy(indices.begin(), indices.end(), result.indices.data<int64_t>());
  return result;
}

}  // namespace commir::cpu
