// Layout kernels: reshape, transpose, static and dynamic slices, concatenation and
// broadcasting. All are copies between strided views (see strided_copy.h), so they work
// on raw bytes and never round.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "runtime/strided_copy.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::ConstStridedView;
using runtime::CopyBoxIn;
using runtime::CopyBoxOut;
using runtime::CopyStrided;
using runtime::StridedView;

namespace {

using runtime::RowMajorStrides;

absl::Status CheckExtentsNonNegative(std::string_view op_name, absl::Span<const int64_t> shape) {
  for (int64_t extent : shape) {
    if (extent < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: negative extent in shape %s", op_name, ShapeToString(shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDynamicRange(std::string_view op_name, const Tensor& x, int64_t dim,
                               int64_t offset, int64_t size) {
  const int64_t extent = x.dim(dim);
  if (size < 0 || size > extent || offset < 0 || offset > extent - size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: offset %d with size %d is out of range for dimension %d of extent %d (%s)", op_name,
        offset, size, dim, extent, x.DebugTypeString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Reshape(const Tensor& x, absl::Span<const int64_t> new_shape) {
  if (absl::Status status = CheckExtentsNonNegative("reshape", new_shape); !status.ok()) {
    return status;
  }
  if (runtime::NumElements(new_shape) != x.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reshape: cannot reshape %s (%d elements) to %s", x.DebugTypeString(),
                        x.num_elements(), ShapeToString(new_shape)));
  }
  Tensor result(x.element_type(), std::vector<int64_t>(new_shape.begin(), new_shape.end()));
  // Row-major order is unchanged, so the bytes are too.
  std::copy_n(static_cast<const std::byte*>(x.raw_data()), x.byte_size(),
              static_cast<std::byte*>(result.raw_data()));
  return result;
}

absl::StatusOr<Tensor> Transpose(const Tensor& x, absl::Span<const int64_t> perm) {
  if (static_cast<int64_t>(perm.size()) != x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("transpose: perm %s does not have one entry per dimension of %s",
                        ShapeToString(perm), x.DebugTypeString()));
  }
  const std::vector<int64_t> strides = RowMajorStrides(x.shape());
  std::vector<int64_t> result_shape(perm.size());
  std::vector<int64_t> source_strides(perm.size());
  std::vector<bool> used(perm.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    absl::StatusOr<int64_t> dim = NormalizeDim("transpose", perm[i], x.rank());
    if (!dim.ok()) return dim.status();
    if (used[*dim]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("transpose: perm %s is not a permutation (dimension %d repeats)",
                          ShapeToString(perm), *dim));
    }
    used[*dim] = true;
    result_shape[i] = x.dim(*dim);
    source_strides[i] = strides[*dim];
  }
  Tensor result(x.element_type(), result_shape);
  CopyStrided(result_shape, ElementTypeByteWidth(x.element_type()),
              ConstStridedView{x.raw_data(), 0, source_strides},
              StridedView{result.raw_data(), 0, RowMajorStrides(result_shape)});
  return result;
}

absl::StatusOr<Tensor> Broadcast(const Tensor& x, absl::Span<const int64_t> shape) {
  if (absl::Status status = CheckExtentsNonNegative("broadcast", shape); !status.ok()) {
    return status;
  }
  bool compatible = x.rank() <= static_cast<int64_t>(shape.size());
  const size_t leading = shape.size() - x.shape().size();
  for (size_t i = 0; compatible && i < x.shape().size(); ++i) {
    compatible = x.dim(i) == 1 || x.dim(i) == shape[leading + i];
  }
  if (!compatible) {
    return absl::InvalidArgumentError(absl::StrFormat("broadcast: %s cannot be broadcast to %s",
                                                      x.DebugTypeString(), ShapeToString(shape)));
  }
  std::vector<int64_t> result_shape(shape.begin(), shape.end());
  Tensor result(x.element_type(), result_shape);
  CopyStrided(result_shape, ElementTypeByteWidth(x.element_type()),
              ConstStridedView{x.raw_data(), 0, BroadcastStrides(x.shape(), result_shape)},
              StridedView{result.raw_data(), 0, RowMajorStrides(result_shape)});
  return result;
}

absl::StatusOr<Tensor> DynamicSlice(const Tensor& x, int64_t dim, int64_t offset, int64_t size) {
  absl::StatusOr<int64_t> slice_dim = NormalizeDim("dynamic_slice", dim, x.rank());
  if (!slice_dim.ok()) return slice_dim.status();
  if (absl::Status status = CheckDynamicRange("dynamic_slice", x, *slice_dim, offset, size);
      !status.ok()) {
    return status;
  }
  std::vector<int64_t> result_shape = x.shape();
  result_shape[*slice_dim] = size;
  std::vector<int64_t> start(x.rank(), 0);
  start[*slice_dim] = offset;
  Tensor result(x.element_type(), result_shape);
  CopyBoxOut(x, start, result);
  return result;
}

absl::Status DynamicUpdateSliceInPlace(Tensor& x, const Tensor& update, int64_t dim,
                                       int64_t offset) {
  absl::StatusOr<int64_t> update_dim = NormalizeDim("dynamic_update_slice", dim, x.rank());
  if (!update_dim.ok()) return update_dim.status();
  bool compatible = update.element_type() == x.element_type() && update.rank() == x.rank();
  for (int64_t d = 0; compatible && d < x.rank(); ++d) {
    compatible = d == *update_dim || update.dim(d) == x.dim(d);
  }
  if (!compatible) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dynamic_update_slice: update %s does not fit %s along dimension %d",
                        update.DebugTypeString(), x.DebugTypeString(), *update_dim));
  }
  if (absl::Status status = CheckDynamicRange("dynamic_update_slice", x, *update_dim, offset,
                                              update.dim(*update_dim));
      !status.ok()) {
    return status;
  }
  std::vector<int64_t> start(x.rank(), 0);
  start[*update_dim] = offset;
  CopyBoxIn(update, start, x);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DynamicUpdateSlice(const Tensor& x, const Tensor& update, int64_t dim,
                                          int64_t offset) {
  Tensor result = x;
  if (absl::Status status = DynamicUpdateSliceInPlace(result, update, dim, offset);
      !status.ok()) {
    return status;
  }
  return result;
}

}  // namespace commir::cpu
