// gather copies rows of bytes; scatter_add sums in the kernels' compute types.
#include "backend_cpu/gather.h"

#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "runtime/compute_values.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

// The table seen as [outer, rows, inner] around `axis`, the indices as a flat list.
struct RowView {
  int64_t axis = 0;
  int64_t outer = 1;
  int64_t rows = 0;
  int64_t inner = 1;
  int64_t count = 0;  // indices
  std::vector<int64_t> result_shape;
};

absl::StatusOr<RowView> ViewRows(std::string_view op_name, const Tensor& table,
                                 const Tensor& indices, int64_t axis) {
  if (indices.element_type() != ElementType::kI32 && indices.element_type() != ElementType::kI64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the indices must be i32 or i64, got %s", op_name, indices.DebugTypeString()));
  }
  absl::StatusOr<int64_t> d = NormalizeDim(op_name, axis, table.rank());
  if (!d.ok()) return d.status();
  RowView v;
  v.axis = *d;
  v.rows = table.dim(*d);
  v.count = indices.num_elements();
  for (int64_t i = 0; i < *d; ++i) {
    v.outer *= table.dim(i);
    v.result_shape.push_back(table.dim(i));
  }
  v.result_shape.insert(v.result_shape.end(), indices.shape().begin(), indices.shape().end());
  for (int64_t i = *d + 1; i < table.rank(); ++i) {
    v.inner *= table.dim(i);
    v.result_shape.push_back(table.dim(i));
  }
  return v;
}

// Every index, widened to i64; an error for the first one outside [0, rows) unless
// `masked` (then such indices stay as they are, for the caller to skip).
absl::StatusOr<std::vector<int64_t>> ReadIndices(std::string_view op_name, const Tensor& indices,
                                                 const RowView& v, int64_t offset, bool masked) {
  std::vector<int64_t> out(v.count);
  for (int64_t k = 0; k < v.count; ++k) {
    const int64_t id = indices.element_type() == ElementType::kI32
                           ? indices.data<int32_t>()[k]
                           : indices.data<int64_t>()[k];
    int64_t row = 0;
    const bool overflow = __builtin_sub_overflow(id, offset, &row);
    const bool in_range = !overflow && row >= 0 && row < v.rows;
    if (!in_range && !masked) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d (element %d of the indices) is out of range for axis %d of extent %d",
          op_name, id, k, v.axis, v.rows));
    }
    out[k] = in_range ? row : -1;
  }
  return out;
}

template <typename T>
Tensor ScatterAddAs(const Tensor& base, const Tensor& updates, const RowView& v,
                    const std::vector<int64_t>& rows) {
  std::vector<T> acc = runtime::LoadAs<T>(base);
  const std::vector<T> add = runtime::LoadAs<T>(updates);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t k = 0; k < v.count; ++k) {
      if (rows[k] < 0) continue;  // another device's row
      T* dst = acc.data() + (o * v.rows + rows[k]) * v.inner;
      const T* src = add.data() + (o * v.count + k) * v.inner;
      for (int64_t j = 0; j < v.inner; ++j) {
        if constexpr (std::is_same_v<T, int64_t>) {
          // Two's-complement wraparound, as the integer add kernel.
          dst[j] = static_cast<int64_t>(static_cast<uint64_t>(dst[j]) + static_cast<uint64_t>(src[j]));
        } else {
          dst[j] = dst[j] + src[j];
        }
      }
    }
  }
  return runtime::StoreAs<T>(base.element_type(), base.shape(), acc);
}

}  // namespace

absl::StatusOr<Tensor> Gather(const Tensor& table, const Tensor& indices, int64_t axis,
                              std::optional<int64_t> offset) {
  absl::StatusOr<RowView> v = ViewRows("gather", table, indices, axis);
  if (!v.ok()) return v.status();
  absl::StatusOr<std::vector<int64_t>> rows =
      ReadIndices("gather", indices, *v, offset.value_or(0), offset.has_value());
  if (!rows.ok()) return rows.status();
  Tensor result(table.element_type(), v->result_shape);
  const size_t row_bytes = static_cast<size_t>(v->inner * ElementTypeByteWidth(table.element_type()));
  const auto* src = static_cast<const std::byte*>(table.raw_data());
  auto* dst = static_cast<std::byte*>(result.raw_data());
  for (int64_t o = 0; o < v->outer; ++o) {
    for (int64_t k = 0; k < v->count; ++k) {
      std::byte* out = dst + (o * v->count + k) * row_bytes;
      const int64_t row = (*rows)[k];
      // All-zero bytes are 0 in every element type.
      if (row < 0) {
        std::memset(out, 0, row_bytes);
      } else {
        std::memcpy(out, src + (o * v->rows + row) * row_bytes, row_bytes);
      }
    }
  }
  return result;
}

absl::StatusOr<Tensor> ScatterAdd(const Tensor& base, const Tensor& indices, const Tensor& updates,
                                  int64_t axis, std::optional<int64_t> offset) {
  absl::StatusOr<RowView> v = ViewRows("scatter_add", base, indices, axis);
  if (!v.ok()) return v.status();
  if (updates.element_type() != base.element_type() || updates.shape() != v->result_shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "scatter_add: the updates must be %s%s, got %s", ElementTypeName(base.element_type()),
        ShapeToString(v->result_shape), updates.DebugTypeString()));
  }
  absl::StatusOr<std::vector<int64_t>> rows =
      ReadIndices("scatter_add", indices, *v, offset.value_or(0), offset.has_value());
  if (!rows.ok()) return rows.status();
  const ElementType type = base.element_type();
  if (IsFloatType(type)) {
    return runtime::DispatchFloatCompute(type, [&](auto t) {
      return ScatterAddAs<decltype(t)>(base, updates, *v, *rows);
    });
  }
  return ScatterAddAs<int64_t>(base, updates, *v, *rows);
}

}  // namespace commir::cpu
