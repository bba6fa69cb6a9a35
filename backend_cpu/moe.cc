// moe_dispatch and moe_collect copy rows of bytes between a token's choice and its
// expert slot; where each choice goes is commir::MoeSlots, shared with every backend.
#include "backend_cpu/moe.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "commir/element_type.h"
#include "commir/moe_routing.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

absl::StatusOr<std::vector<int64_t>> Slots(const char* op, const Tensor& experts_of,
                                           int64_t experts, int64_t capacity, int64_t groups) {
  if ((experts_of.element_type() != ElementType::kI32 &&
       experts_of.element_type() != ElementType::kI64) ||
      experts_of.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the expert indices must be an i32 or i64 [tokens, k], got %s", op,
                        experts_of.DebugTypeString()));
  }
  absl::StatusOr<std::vector<int64_t>> slots =
      MoeSlots(experts_of.ToInt64(), experts_of.dim(0), experts_of.dim(1), experts, capacity, groups);
  if (!slots.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", op, slots.status().message()));
  }
  return slots;
}

size_t RowBytes(const Tensor& t) {
  return static_cast<size_t>(t.dim(t.rank() - 1)) *
         static_cast<size_t>(ElementTypeByteWidth(t.element_type()));
}

}  // namespace

absl::StatusOr<Tensor> MoeDispatch(const Tensor& rows, const Tensor& experts_of, int64_t experts,
                                   int64_t capacity, int64_t groups) {
  if (experts < 1 || capacity < 1 || groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("moe_dispatch: experts (%d), capacity (%d) and groups (%d) must be positive",
                        experts, capacity, groups));
  }
  absl::StatusOr<std::vector<int64_t>> slots =
      Slots("moe_dispatch", experts_of, experts, capacity, groups);
  if (!slots.ok()) return slots.status();
  const int64_t tokens = experts_of.dim(0);
  const int64_t k = experts_of.dim(1);
  const bool per_choice = rows.rank() == 3;
  if (!((rows.rank() == 2 && rows.dim(0) == tokens) ||
        (per_choice && rows.dim(0) == tokens && rows.dim(1) == k))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("moe_dispatch: the rows must be [%d, hidden] or [%d, %d, hidden], got %s",
                        tokens, tokens, k, rows.DebugTypeString()));
  }
  const int64_t hidden = rows.dim(rows.rank() - 1);
  // The verifier bounded experts x groups x capacity x hidden by the buffer's type.
  const int64_t columns = groups * capacity;
  Tensor buffer(rows.element_type(), {experts, columns, hidden});
  const size_t row_bytes = RowBytes(rows);
  auto* dst = static_cast<std::byte*>(buffer.raw_data());
  // All-zero bytes are 0 in every element type: the empty slots.
  std::memset(dst, 0, static_cast<size_t>(experts * columns) * row_bytes);
  const auto* src = static_cast<const std::byte*>(rows.raw_data());
  for (int64_t choice = 0; choice < tokens * k; ++choice) {
    const int64_t slot = (*slots)[choice];
    if (slot < 0) continue;  // dropped: over its expert's capacity
    const int64_t row = per_choice ? choice : choice / k;
    std::memcpy(dst + slot * row_bytes, src + row * row_bytes, row_bytes);
  }
  return buffer;
}

absl::StatusOr<Tensor> MoeCollect(const Tensor& buffer, const Tensor& experts_of,
                                  int64_t groups) {
  if (buffer.rank() != 3 || buffer.dim(0) < 1 || buffer.dim(1) < 1 || groups < 1 ||
      buffer.dim(1) % groups != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "moe_collect: the buffer must be a non-empty [experts, groups x capacity, hidden] for "
        "%d groups, got %s",
        groups, buffer.DebugTypeString()));
  }
  absl::StatusOr<std::vector<int64_t>> slots =
      Slots("moe_collect", experts_of, buffer.dim(0), buffer.dim(1) / groups, groups);
  if (!slots.ok()) return slots.status();
  const int64_t tokens = experts_of.dim(0);
  const int64_t k = experts_of.dim(1);
  Tensor rows(buffer.element_type(), {tokens, k, buffer.dim(2)});
  const size_t row_bytes = RowBytes(buffer);
  const auto* src = static_cast<const std::byte*>(buffer.raw_data());
  auto* dst = static_cast<std::byte*>(rows.raw_data());
  for (int64_t choice = 0; choice < tokens * k; ++choice) {
    const int64_t slot = (*slots)[choice];
    std::byte* out = dst + choice * row_bytes;
    if (slot < 0) {
      std::memset(out, 0, row_bytes);  // a dropped choice contributes nothing
    } else {
      std::memcpy(out, src + slot * row_bytes, row_bytes);
    }
  }
  return rows;
}

}  // namespace commir::cpu
